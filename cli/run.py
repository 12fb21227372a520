"""`dl run`: assemble plugins into benchmark runs, schedule them, render and save the results."""

import contextlib
import dataclasses
import itertools
import json
import sys
from pathlib import Path

import click
from rich.console import Console

from dl.bench.scenarios import SCENARIOS, scenario_options
from dl.bench.spec import MODES, RunSpec

from .console import make_console
from .help_groups import GroupedCommand
from .options import (
    PluginOption,
    parse_delta,
    parse_episodes,
    parse_key_values,
    parse_workers,
    plugin_options,
    split_csv,
    writable_folder,
)

_SCENARIO_HELP = "\n".join(f"  {name}: {s['_about']}" for name, s in SCENARIOS.items())
_DEFAULTS = RunSpec()


RUN_GROUPS = {
    "What to load": ["scenario", "root", "episodes", "modes", "deltas", "features", "image_dtype", "tolerance_s",
                     "frame_pairing", "strict", "source", "source_option", "repo_id", "revision", "data_files_root",
                     "storage_option", "cache_dir", "mix", "mix_weights", "mix_rename", "mix_features",
                     "mix_samples_per_epoch"],
    "How to load": ["loader", "loader_option", "decoder", "decoder_option", "batch_size", "workers", "prefetch_factor",
                    "budgets", "seed"],
    "What to measure": ["warmup_batches", "warmup_s", "duration", "single_proc_s", "single_proc_samples", "ceiling_s",
                        "repeats", "out_dir", "as_json"],
    "Where to run": ["scheduler", "scheduler_option", "resource", "wait", "world_size"],
}
"""`dl run --help`'s headings and the options under each (`GroupedCommand`)."""


@click.command(cls=GroupedCommand, groups=RUN_GROUPS,
               epilog=f"\b\nScenarios (--scenario):\n{_SCENARIO_HELP}\n\n\b\nExamples:\n"
               "  dl run                                   # embedded default dataset, map loader, 2 workers\n"
               "  dl run --root DATASET --episodes 0,3-6 --mode single,sarm --num-workers 0,2\n"
               "  dl run --scenario mmap_local_maxworkers --root DATASET --duration 60\n"
               "  dl run --loader pool --decode-budget 0,128M,512M --root DATASET   # sequential decode trade-off\n"
               "  dl run --decoder auto --root DATASET        # time the decoders here, use the fastest\n"
               "  dl run --source bucket --root s3://BUCKET/DATASET --storage-option endpoint_url=URL\n"
               "  dl run --source hub --repo-id OWNER/NAME --revision main --loader pool\n"
               "  dl run --mix DATASET_A:0.7 --mix s3://BUCKET/B:0.3 --mix-rename observation.images.top=observation."
               "images.cam0")
@click.option("--scenario", multiple=True, metavar="NAME", help="Preset of several options (below); comma-separate "
              "or repeat to run several, one after another (a serial chain on a cluster).")
@click.option("--source", cls=PluginOption, kind="source", default_name=_DEFAULTS.source)
@click.option("--loader", cls=PluginOption, kind="loader", default_name=_DEFAULTS.loader,
              also="; comma-separate to compare several in one table, e.g. map,pool,lerobot,lance (the peers: "
                   "LeRobot's and other projects' readers, each run in its own environment, scripts/setup_peers.sh)")
@click.option("--decoder", cls=PluginOption, kind="decoder", default_name=_DEFAULTS.decoder,
              also=", or auto (time each decoder that can run here on the dataset, use the fastest)")
@click.option("--scheduler", cls=PluginOption, kind="scheduler", default_name=_DEFAULTS.scheduler)
@click.option("--root", help="Dataset root for the source. Default: dl's embedded synthetic dataset "
              "(generated once into the cache folder).")
@click.option("--episodes", help="Episodes to load: indices and inclusive ranges, e.g. 0,3-6,8 [all].")
@click.option("--mode", "modes", multiple=True,
              help="single (one frame per camera), sarm (0..7 s at 1 s on every camera and the action), chunk "
                   "(16-step action chunk at 1/fps). Comma-separate or repeat to run several [single].")
@click.option("--delta-timestamps", "deltas", multiple=True, metavar="KEY=OFFSETS",
              help="Extra window in seconds on any key, e.g. observation.state=-0.1,0 (repeatable).")
@click.option("--features", metavar="KEYS", help="The features a sample carries, comma-separated keys or globs, e.g. "
              "observation.images.top,observation.state,action: other cameras are never decoded, other columns never "
              "read [all].")
@click.option("--image-dtype", type=click.Choice(["float32", "uint8"]), help="Camera frames as float32 in [0, 1] "
              "or raw uint8 [float32].")
@click.option("--tolerance-s", type=click.FloatRange(0, min_open=True), help="Serve a camera frame when its timestamp "
              f"is less than this many seconds from the row's, as LeRobot's tolerance_s [{_DEFAULTS.tolerance_s}]; "
              "raise it for recorded (wall-clock) timestamps: `dl validate` says which value serves them.")
@click.option("--frame-pairing", type=click.Choice(["timestamp", "row"]), help="Which camera frame a row gets: the "
              "one nearest its timestamp (LeRobot's) or, with row, frame i of its episode for row i (recorded "
              "timestamps that drift from a video of one frame per row; windows count frames) [timestamp].")
@click.option("--strict", is_flag=True, default=None, help="Refuse NaN or inf in float features instead of warning "
              "(LeRobot serves them as stored).")
@click.option("--batch-size", type=click.IntRange(1), help=f"[{_DEFAULTS.batch_size}]")
@click.option("--num-workers", "workers", multiple=True,
              help=f"DataLoader workers; comma-separate or repeat to run several [{_DEFAULTS.num_workers}].")
@click.option("--world-size", type=click.IntRange(1), help="Ranks: >1 runs that many processes as a "
              "torch.distributed gloo group on this machine (per-rank results and a merged line) [1].")
@click.option("--prefetch-factor", type=click.IntRange(1), help=f"Batches per worker in flight "
              f"[{_DEFAULTS.prefetch_factor}].")
@click.option("--warmup-batches", type=click.IntRange(0), help=f"Batches before the window, at least "
              f"[{_DEFAULTS.warmup_batches}].")
@click.option("--warmup-s", type=click.FloatRange(0), help="Seconds of batches before the window, at least (at most a "
              f"quarter of the window) [{_DEFAULTS.warmup_s}].")
@click.option("--duration", type=click.FloatRange(0.1), help=f"Steady-state window, seconds [{_DEFAULTS.duration}].")
@click.option("--single-proc-s", type=click.FloatRange(0.1), help="Seconds timed in one process without workers, "
              f"after {_DEFAULTS.single_proc_warmup_s} s of warm-up (at most half the window) "
              f"[{_DEFAULTS.single_proc_s}].")
@click.option("--single-proc-samples", type=click.IntRange(1), help="Samples timed in one process, at least "
              f"[{_DEFAULTS.single_proc_samples}].")
@click.option("--seed", type=int, help=f"Shuffle seed [{_DEFAULTS.seed}].")
@click.option("--decode-budget", "budgets", multiple=True, metavar="BYTES",
              help="Decoded frames each consumer of the pool loader may hold, e.g. 256M, 1G, 0 (decode per sample): "
                   "its decode_budget option. Comma-separate or repeat to run several [the loader's default, 256M].")
@click.option("--ceiling-s", type=click.FloatRange(0), help="Seconds each run spends measuring the machine's decode "
              "ceiling for the dataset (random single frames and whole episodes in order, each the best of several "
              f"trials), at most half the window; 0 skips it [{_DEFAULTS.ceiling_s}].")
@click.option("--repo-id", help="A Hub dataset repo, owner/name: the root of --source hub (same as --root "
              "hf://datasets/owner/name), or where --source bucket reads meta/ while --data-files-root holds the rest.")
@click.option("--revision", help="Hub branch, tag or commit of --repo-id [main]; resolved to its commit once, "
              "every run reads that commit (source option revision).")
@click.option("--data-files-root", help="Where data/ and videos/ live when meta/ is elsewhere, e.g. s3://bucket/ds "
              "(source option data_files_root; --source bucket).")
@click.option("--storage-option", multiple=True, metavar="KEY=VALUE", help="A filesystem option of a remote source, "
              "e.g. endpoint_url=http://127.0.0.1:9000, profile=NAME, anon=true (repeatable; source option "
              "storage_options).")
@click.option("--cache-dir", metavar="DIR", help="Where a remote source (hub, bucket) keeps the blocks it prefetches: "
              "one folder per host, host-<name>, shared by every process on it (source option cache_dir) "
              "[node-local: $SLURM_TMPDIR, else $TMPDIR, else dl's cache folder].")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin "
              "(repeatable; `dl plugins` lists each plugin's options).")
@click.option("--loader-option", multiple=True, metavar="KEY=VALUE", help="An option of the loader plugin, e.g. "
              "episode_pool_size=64 for pool (repeatable).")
@click.option("--decoder-option", multiple=True, metavar="KEY=VALUE", help="An option of the decoder plugin, "
              "e.g. cache_size=16 (repeatable).")
@click.option("--scheduler-option", multiple=True, metavar="KEY=VALUE", help="An option of the scheduler plugin, "
              "e.g. timeout_s=600 (repeatable).")
@click.option("--resource", multiple=True, metavar="KEY=VALUE", help="What each run asks of a cluster scheduler: "
              "nodes, tasks_per_node, cpus_per_task, mem (MB or 8G), time (minutes or HH:MM:SS), gpus "
              "(repeatable; over the scenario's).")
@click.option("--wait/--no-wait", default=None, help="With a scheduler that queues (slurm): wait for the runs and "
              "show their results, instead of returning once they are queued [no-wait; follow with dl status].")
@click.option("--mix", multiple=True, metavar="ROOT_OR_URL[:WEIGHT]", help="A member of a mixture of datasets "
              "(repeat for each): a local folder (source local), an hf:// URL (hub) or another URL (bucket; --source "
              "overrides), with an optional weight after the last ':'. Replaces --root; see docs/library.md, "
              "\"Training on several datasets\".")
@click.option("--mix-weights", type=click.Choice(["frames", "episodes"]), help="How to weigh --mix members given no "
              "WEIGHT: by their frames (every frame once per epoch) or by their episodes [frames].")
@click.option("--mix-rename", multiple=True, metavar="OLD=NEW", help="Serve a member's key OLD as NEW, in every "
              "member that has OLD, e.g. observation.images.top=observation.images.cam0 (repeatable).")
@click.option("--mix-feature", "mix_features", multiple=True, metavar="KEY", help="A key the mixture serves "
              "(comma-separate or repeat) [every key all members have, after --mix-rename].")
@click.option("--mix-samples-per-epoch", type=click.IntRange(1), help="Samples of a mixture epoch [enough to read "
              "every member whole at least once].")
@click.option("--out-dir", help=f"Folder for the results: one JSON per run and results.csv, which covers every "
              f"result in the folder [{_DEFAULTS.out_dir}].")
@click.option("--repeats", type=click.IntRange(1), default=1, show_default=True, help="Run each configuration this "
              "many times, interleaved (A B C, B C A, ...), each in a fresh process, and report the median and range "
              "of each rate.")
@click.option("--json", "as_json", is_flag=True, help="Print the results (and the repeats' summary) as JSON on "
              "stdout, for scripts; everything else goes to stderr.")
def run(scenario, modes, deltas, workers, budgets, episodes, source_option, loader_option, decoder_option,
        scheduler_option, resource, wait, repo_id, revision, data_files_root, storage_option, cache_dir, mix,
        mix_weights, mix_rename, mix_features, mix_samples_per_epoch, repeats, as_json, **given):
    """Benchmark dataloading: samples/s, decoded frames/s, fetch vs decode split, shuffle randomness,
    latency percentiles, peak RSS of the process tree, decoder cache counters.

    Every combination of --mode and --num-workers is one run, each in a fresh process. Results print as
    a table and are written to OUT_DIR as one JSON per run and results.csv (one row per JSON in OUT_DIR). A run
    writes NAME.json: a rerun (same dataset and settings) replaces it, saying so; a run of the same name on
    another dataset or with other settings keeps it and writes NAME-2.json (-3...). What each field means:
    docs/benchmark.md.
    """
    scenarios = split_csv(scenario) or [None]
    unknown = [name for name in scenarios if name is not None and name not in SCENARIOS]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: choose from {', '.join(sorted(SCENARIOS))}",
                                 param_hint="--scenario")
    mode_list = split_csv(modes) or [_DEFAULTS.mode]
    budget_list = _budgets(budgets)
    bad = [m for m in mode_list if m not in MODES]
    if bad:
        raise click.BadParameter(f"{', '.join(bad)}: choose from {', '.join(MODES)}", param_hint="--mode")
    from dl.bench.loopback import needs_loopback, serve_on_loopback
    from dl.bench.mixture_run import prepare_mixture
    from dl.bench.repeats import interleaved, summarize
    from dl.bench.results import keep_earlier_results
    from dl.bench.session import (
        check_dataset,
        check_plugins,
        finish,
        resolve_decoder,
        stream_warnings,
        submit_specs,
        write_snapshot,
    )
    from dl.host.manager import get_plugins

    from .render import codec_fixes, render_repeats, render_results
    from .status import follow, render_statuses

    console = make_console(stderr=as_json)
    remote = (repo_id, revision, data_files_root, storage_option, cache_dir)
    loaders = split_csv([given["loader"]]) if given.get("loader") else [None]
    bases = [_base_spec(name, {**given, "loader": loader}, deltas, episodes, source_option,
                        _loader_items(loader, loaders, loader_option), decoder_option, resource, remote)
             for name in scenarios for loader in loaders]
    if mix:
        bases = [_with_mix(b, given, mix, mix_weights, mix_rename, mix_features, mix_samples_per_epoch) for b in bases]
    worker_lists = [parse_workers(workers, base.num_workers) for base in bases]
    schedulers = {b.scheduler for b in bases}
    if len(schedulers) > 1:
        raise click.BadParameter(f"these scenarios run on different schedulers ({', '.join(sorted(schedulers))}); "
                                 "choose one with --scheduler", param_hint="--scenario")
    for base in bases:
        check_plugins(_with_budget(base, budget_list[0], several=len(loaders) > 1))
    scheduler = get_plugins().registry.create(
        "scheduler", bases[0].scheduler,
        **plugin_options("scheduler", bases[0].scheduler, scheduler_option, "--scheduler-option"))
    if not scheduler.queues:  # the runs execute on this machine: refuse worker counts it cannot run, up front
        _check_worker_counts([w for ws in worker_lists for w in ws])
    out_dir = writable_folder(bases[0].out_dir)
    default_dataset = bases[0].root is None and not bases[0].mix
    with contextlib.ExitStack() as servers:  # loopback servers of the remote scenarios live while runs execute
        specs, checked = [], {}
        for base, worker_list in zip(bases, worker_lists, strict=True):
            if base.root is None and not base.mix:
                base.root = str(_default_root(console))
            if scheduler.queues and needs_loopback(base):
                raise click.BadParameter(f"{base.scenario} serves a local --root from this process, which a cluster's "
                                         "nodes cannot reach: give a remote --root, or --scheduler local",
                                         param_hint="--scenario")
            base = servers.enter_context(serve_on_loopback(base, lambda line: console.print(line, highlight=False)))
            if base.mix:
                base = prepare_mixture(base, writable_folder(base.out_dir, create=True) / "specs")
            else:
                key = json.dumps([base.root, base.source, base.source_options, base.episodes], default=str)
                meta = checked[key] = checked.get(key) or check_dataset(base)  # once for several --loader names
                base = stream_warnings(resolve_decoder(base, meta), meta)
                for line in codec_fixes(base.decoder_calibration or {"decoders": {}}):
                    console.print(line, highlight=False, soft_wrap=True, markup=False)
                base = write_snapshot(base, meta, writable_folder(base.out_dir, create=True) / "specs")
            specs += [_with_budget(dataclasses.replace(base, mode=m, num_workers=w, name=""), b, len(loaders) > 1)
                      for m, w, b in itertools.product(mode_list, worker_list, budget_list)]
        specs = interleaved(specs, repeats)
        for line in keep_earlier_results(specs, out_dir):  # a result of another run is never replaced unseen
            console.print(line, highlight=False, markup=False)
        submission = submit_specs(scheduler, specs, out_dir)
        if scheduler.queues and not wait:
            render_statuses(submission, scheduler.status(submission), console)
            console.print(f"submitted {len(specs)} run(s); follow with: dl status {out_dir} (--wait), stop with: "
                          f"dl cancel {out_dir}", highlight=False, soft_wrap=True, markup=False)
            return
        statuses = (follow(scheduler, submission, console, poll_s=5.0) if scheduler.queues
                    else scheduler.wait(submission))
    if scheduler.queues:
        render_statuses(submission, statuses, console)
    results, in_folder = finish(submission, statuses, out_dir)
    summary = summarize(results) if repeats > 1 else None
    if as_json:
        click.echo(json.dumps({"results": results, **({"repeats": summary} if summary else {})}))
    else:
        render_results(results, console, default_dataset=default_dataset)
        if summary:
            render_repeats(summary, console)
    written = sum(Path(out_dir, f"{r['name']}.json").is_file() for r in results)
    console.print(f"results: {written} JSON file(s) written to {out_dir}/; {out_dir / 'results.csv'} lists all "
                  f"{in_folder} result(s) in that folder.", highlight=False, markup=False)
    if any(r.get("status") != "ok" for r in results):
        sys.exit(1)


def _check_worker_counts(counts: list[int]) -> None:
    from dl.contracts.errors import DlError
    from dl.dataloader.world import check_worker_count

    try:
        check_worker_count(max(counts))
    except DlError as exc:
        raise click.BadParameter(str(exc), param_hint="--num-workers") from None


def _budgets(values: tuple[str, ...]) -> list:
    """The --decode-budget values, checked (None: the flag was not given)."""
    from dl.contracts.errors import DlError
    from dl.contracts.units import parse_bytes

    budgets = split_csv(values)
    for budget in budgets:
        try:
            parse_bytes(budget)
        except DlError as exc:
            raise click.BadParameter(str(exc).removeprefix("size: "), param_hint="--decode-budget") from None
    return budgets or [None]


def _with_budget(spec: RunSpec, budget: str | None, several: bool = False) -> RunSpec:
    """`spec` with the loader option decode_budget set to `budget` and the budget in its name (unchanged for
    None, and, among `several` --loader names, for a loader that takes no decode_budget)."""
    if budget is None or (several and not _takes(spec.loader, "decode_budget")):
        return spec
    spec = dataclasses.replace(spec, loader_options={**spec.loader_options, "decode_budget": budget})
    spec.name = f"{spec.name}-db{budget}"
    return spec


def _takes(loader: str, option: str) -> bool:
    from dl.host.manager import get_plugins

    return not get_plugins().registry.get("loader", loader).options.unknown({option: None})


def _loader_items(loader: str | None, loaders: list, items: tuple[str, ...]) -> tuple[str, ...]:
    """The --loader-option items for `loader`: all of them for a single --loader, else those it takes (an item no
    listed loader takes is refused, naming them)."""
    if len(loaders) < 2:
        return items
    keys = {item: item.partition("=")[0] for item in items}
    for item, key in keys.items():
        if not any(_takes(name, key) for name in loaders):
            raise click.BadParameter(f"{item}: none of the loaders {', '.join(loaders)} takes {key} (`dl plugins` "
                                     "lists their options)", param_hint="--loader-option")
    return tuple(item for item, key in keys.items() if _takes(loader, key))


def _base_spec(scenario, given, deltas, episodes, source_option, loader_option, decoder_option, resource,
               remote) -> RunSpec:
    """The RunSpec of one scenario (or none): its preset, then what the command line gave (`remote`: the
    --repo-id, --revision, --data-files-root, --storage-option and --cache-dir values)."""
    preset = scenario_options(scenario) if scenario else {}
    fields = {**preset, **{k: v for k, v in given.items() if v is not None}}
    fields.update(scenario=scenario, delta_timestamps=parse_delta(deltas))
    for kind, items in (("source", source_option), ("loader", loader_option), ("decoder", decoder_option)):
        name = fields.get(kind) or getattr(_DEFAULTS, kind)
        fields[f"{kind}_options"] = {**preset.get(f"{kind}_options", {}),
                                     **plugin_options(kind, name, items, f"--{kind}-option")}
    fields["resources"] = {**preset.get("resources", {}), **parse_key_values(resource, "--resource")}
    fields["source_options"].update(_remote_options(fields, *remote))
    if episodes is not None:
        fields["episodes"] = parse_episodes(episodes)
    if fields.get("features"):
        fields["features"] = split_csv([fields["features"]])
    return RunSpec(**fields)


def _with_mix(base: RunSpec, given: dict, mix, weights, rename, features, samples_per_epoch) -> RunSpec:
    """`base` as a mixture of the --mix members (`dl.bench.mixture_run`), with the --mix-* options."""
    from dl.bench.mixture_run import parse_member

    if base.root:
        raise click.BadParameter("give --root or --mix members, not both", param_hint="--mix")
    options = {"weights": weights, "rename": parse_key_values(rename, "--mix-rename", guess=False),
               "features": split_csv(features) or None, "samples_per_epoch": samples_per_epoch}
    members = [parse_member(text, given.get("source")) for text in mix]
    return dataclasses.replace(base, mix=members, mix_options={k: v for k, v in options.items() if v})


def _remote_options(fields: dict, repo_id, revision, data_files_root, storage_option, cache_dir) -> dict:
    """The remote-source flags as source options (and --repo-id as the root); checked by the source."""
    if repo_id:
        if fields.get("root"):
            raise click.BadParameter("give --root or --repo-id, not both (with --repo-id, --data-files-root names "
                                     "where the data lives)", param_hint="--repo-id")
        fields["root"] = f"hf://datasets/{repo_id}"
    options = {"revision": revision, "data_files_root": data_files_root, "cache_dir": cache_dir}
    storage = parse_key_values(storage_option, "--storage-option")
    if storage:
        options["storage_options"] = storage
    return {k: v for k, v in options.items() if v is not None}


def _default_root(console: Console) -> Path:
    from dl.bench.default_dataset import default_dataset_root, ensure_default_dataset
    from dl.bench.progress import rich_progress

    if (default_dataset_root() / "meta" / "info.json").is_file():
        return default_dataset_root()
    console.print(f"generating dl's embedded default dataset into {default_dataset_root()} (once)", highlight=False,
                  soft_wrap=True, markup=False)
    with rich_progress("default dataset", console) as progress:
        return ensure_default_dataset(progress=lambda done, total: progress("encoding episodes", done, total))
