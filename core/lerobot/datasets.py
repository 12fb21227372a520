"""`make_train_eval_datasets`: what LeRobot's factory of that name (`lerobot.datasets.factory`) builds for
lerobot-train, built on dl: the same `delta_timestamps` (LeRobot's own `resolve_delta_timestamps`), uint8 frames
(lerobot-train's `return_uint8=True`), `image_transforms` (LeRobot's `ImageTransforms`), `depth_output_unit`,
`tolerance_s`, `episodes`, `eval_split` and `use_imagenet_stats`, on dl's loaders and sources."""

import logging
import math

from ..contracts.config import LoaderConfig
from ..contracts.errors import DlError, warn
from ..dataloader.world import resolve_ranks
from ..host.assembly import build_loader, open_dataset
from ..mixture.api import make_mixture
from .meta import LeRobotMeta
from .options import TrainOptions
from .views import LeRobotMapView, LeRobotStreamView

log = logging.getLogger(__name__)


def make_train_eval_datasets(cfg, options: TrainOptions):
    """`(train dataset, eval dataset or None)` for lerobot-train's `cfg` (a `TrainPipelineConfig`), read by dl as
    `options` say: a `LeRobotMapView` (loader `map`) or a `LeRobotStreamView` (`pool`, or a mixture with
    `options.mix`); the eval split (`--dataset.eval_split`, LeRobot's: the last episodes of each task) is a
    `LeRobotMapView` without transforms.

    Raises:
        DlError: a dataset dl cannot read as asked (the message names the file or the option).
    """
    from lerobot.transforms import ImageTransforms

    transforms = ImageTransforms(cfg.dataset.image_transforms) if cfg.dataset.image_transforms.enable else None
    if options.mix:
        return _mixture(cfg, options, transforms), None
    root = cfg.dataset.root or cfg.dataset.repo_id
    source = options.source or ("local" if cfg.dataset.root else "hub")
    source_options = dict(options.source_options)
    if source == "hub" and cfg.dataset.revision:
        source_options.setdefault("revision", cfg.dataset.revision)
    meta = open_dataset(str(root), source, source_options)
    lerobot_meta = LeRobotMeta.of_dataset(meta, cfg.dataset.repo_id, cfg.dataset.root, options.rename,
                                          cfg.dataset.depth_output_unit)
    deltas = _dataset_keys(_delta_timestamps(cfg, lerobot_meta), options.rename)
    episodes = cfg.dataset.episodes
    eval_episodes = None
    if cfg.dataset.eval_split:
        episodes, eval_episodes = _eval_split(meta, episodes, cfg.dataset.eval_split)
    if options.loader == "pool" and getattr(cfg.trainable_config, "drop_n_last_frames", 0):
        warn(f"dl train: the pool loader serves every frame; the policy's drop_n_last_frames="
             f"{cfg.trainable_config.drop_n_last_frames} applies with --dl.loader map (LeRobot's sampler).")
    config = dict(delta_timestamps=deltas, image_dtype="uint8", depth_output_unit=cfg.dataset.depth_output_unit,
                  tolerance_s=cfg.tolerance_s, frame_pairing=options.frame_pairing, seed=cfg.seed or 0)

    def view(loader_name: str, selection, with_transforms: bool):
        built = build_loader(meta, loader_name, options.decoder, config=LoaderConfig(episodes=selection, **config),
                             loader_options=_loader_options(options) if loader_name == "pool" else None)
        loader = built.loader
        if with_transforms and transforms is not None:
            loader.set_image_transforms(transforms)
        kind = LeRobotStreamView if loader_name == "pool" else LeRobotMapView
        return kind(loader, lerobot_meta, options.rename)

    train = view(options.loader, episodes, True)
    evaluation = view("map", eval_episodes, False) if eval_episodes else None
    if cfg.dataset.use_imagenet_stats:
        lerobot_meta.use_imagenet_stats()
    log.info("dl train: %s loader, %d episodes, %d frames from %s (%s source)%s", options.loader, train.num_episodes,
             train.num_frames, meta.source.url, source,
             f"; eval split: {evaluation.num_episodes} episodes" if evaluation is not None else "")
    return train, evaluation


def _mixture(cfg, options: TrainOptions, transforms) -> LeRobotStreamView:
    """A `dl.make_mixture` of `options.mix` (roots or repo ids, with weights), read with the `pool` loader; its
    delta_timestamps resolved on its first member's features (renamed), its stats aggregated as LeRobot's."""
    source = options.source or "local"
    metas = [open_dataset(str(root), source, dict(options.source_options)) for root, _ in options.mix]
    first = LeRobotMeta.of_dataset(metas[0], cfg.dataset.repo_id, options.mix[0][0], options.rename,
                                   cfg.dataset.depth_output_unit)
    deltas = _delta_timestamps(cfg, first)
    loaders = []
    for meta in metas:
        own = {served: key for key, served in options.rename.items() if key in meta.features}
        member_deltas = None if deltas is None else {own.get(k, k): v for k, v in deltas.items()}
        config = LoaderConfig(delta_timestamps=member_deltas, image_dtype="uint8", tolerance_s=cfg.tolerance_s,
                              depth_output_unit=cfg.dataset.depth_output_unit, frame_pairing=options.frame_pairing,
                              seed=cfg.seed or 0)
        loader = build_loader(meta, "pool", options.decoder, config=config,
                              loader_options=_loader_options(options)).loader
        if transforms is not None:
            loader.set_image_transforms(transforms)
        loaders.append(loader)
    mixture = make_mixture(loaders, weights=[w for _, w in options.mix], rename=options.rename, seed=cfg.seed or 0)
    lerobot_meta = LeRobotMeta.of_mixture(mixture, cfg.dataset.repo_id)
    if cfg.dataset.use_imagenet_stats:
        lerobot_meta.use_imagenet_stats()
    log.info("dl train: a mixture of %s (weights %s), %d samples an epoch", ", ".join(mixture.names),
             [round(w, 4) for w in mixture.weights], mixture.samples_per_epoch)
    return LeRobotStreamView(mixture, lerobot_meta)


def _delta_timestamps(cfg, meta: LeRobotMeta) -> dict | None:
    """LeRobot's own `resolve_delta_timestamps` on the served (renamed) features."""
    from lerobot.datasets.factory import resolve_delta_timestamps

    return resolve_delta_timestamps(cfg.trainable_config, meta)


def _dataset_keys(deltas: dict | None, rename: dict) -> dict | None:
    """`deltas` keyed by the dataset's own names (undoing `rename`)."""
    if deltas is None:
        return None
    back = {served: key for key, served in rename.items()}
    return {back.get(k, k): v for k, v in deltas.items()}


def _loader_options(options: TrainOptions) -> dict:
    """The `pool` loader's options: those given, and with several processes `drop_last` (every rank the same number
    of samples an epoch, so all stay in the same epoch and one checkpoint's loader state fits each)."""
    out = {"drop_last": True} if resolve_ranks(None, None).world_size > 1 else {}
    if options.decode_budget is not None:
        out["decode_budget"] = options.decode_budget
    if options.episode_pool_size is not None:
        out["episode_pool_size"] = options.episode_pool_size
    return out


def _eval_split(meta, episodes: list[int] | None, split: float) -> tuple[list[int], list[int]]:
    """LeRobot's split (`make_train_eval_datasets`): per task (an episode's first), its last ceil(n x split)
    episodes are held out.

    Raises:
        DlError: the split leaves no training episode.
    """
    chosen = list(episodes) if episodes is not None else [int(i) for i in meta.columns.index]
    by_task: dict[str, list[int]] = {}
    for e in chosen:
        tasks = meta.episodes[e].tasks
        by_task.setdefault(tasks[0] if tasks else "", []).append(e)
    train, held = [], []
    for group in by_task.values():
        n = math.ceil(len(group) * split)
        train.extend(group[: len(group) - n])
        held.extend(group[len(group) - n:])
    if not train:
        raise DlError(f"--dataset.eval_split={split} leaves no training episode of {len(chosen)}: lower it.")
    return sorted(train), sorted(held)
