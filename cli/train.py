"""`dl train`: LeRobot's `lerobot-train` on dl's loaders (`dl.lerobot`)."""

import click


@click.command("train", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                          "help_option_names": []})
@click.option("-h", "--help", "show_help", is_flag=True, help="Show this message and exit.")
@click.pass_context
def train(ctx, show_help):
    """Train a LeRobot policy with LeRobot's own lerobot-train (0.6.1, unmodified: its config, training loop,
    checkpoints, logging, evaluation) on a dataset dl reads. Every lerobot-train argument is passed through:

    \b
      dl train --dataset.repo_id=NAME --dataset.root=PATH --policy.type=act --batch_size=16 \\
               --num_workers=2 --steps=20000 --save_freq=5000 --output_dir=outputs/act [--dl.loader=pool ...]
      dl train --resume=true --config_path=outputs/act/checkpoints/last/pretrained_model/train_config.json

    dl's own (their defaults in brackets; a resume reuses the checkpoint's unless given again):

    \b
      --dl.loader map|pool        map: LeRobot's sampler orders it (its seed, drop_n_last_frames, resume);
                                  pool: dl's streaming episode pool, each process reads its own share,
                                  resumed from dl's loader state saved in the checkpoint  [map]
      --dl.source local|hub|bucket  [local with --dataset.root, else hub with --dataset.repo_id]
      --dl.source_option KEY=VALUE  a source option (`dl plugins` lists them), e.g. storage options
      --dl.decoder cpu|nvdec      [cpu]
      --dl.frame_pairing timestamp|row   [timestamp, LeRobot's]
      --dl.decode_budget SIZE     pool: decoded bytes per consumer, e.g. 256M, 1G, 0  [256M]
      --dl.episode_pool_size N    pool: open episodes per consumer  [16]
      --dl.rename OLD=NEW[,...]   serve a key under another name (e.g. actions=action for datasets that
                                  do not use LeRobot's names); stats and features follow
      --dl.mix ROOT:WEIGHT[,...]  train on a weighted mixture (dl.make_mixture) instead of --dataset.root;
                                  its members' stats aggregated as LeRobot aggregates datasets

    lerobot-train's own help: dl train --help-lerobot. Needs LeRobot: pip install 'dl[lerobot]' (Python >= 3.12).
    """
    if show_help:
        click.echo(ctx.get_help())
        ctx.exit(0)
    from dl.lerobot.session import run

    args = ["--help" if a == "--help-lerobot" else a for a in ctx.args]
    run(args)
