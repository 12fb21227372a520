"""The library entry points: a loader from plugin names, and the DataLoader that goes with it."""

import dataclasses

from ..contracts.config import LoaderConfig
from ..contracts.errors import DlError
from ..dataloader.build import build_dataloader
from .assembly import assemble


def make_dataset(root: str, *, source: str = "local", loader: str = "map", decoder: str = "cpu",
                 source_options: dict | None = None, loader_options: dict | None = None,
                 decoder_options: dict | None = None, **config):
    """Open the dataset at `root` through the named plugins and return the loader (a torch dataset).

    Args:
        root: the dataset root as the source understands it (a folder for `local`).
        source, loader, decoder: registered plugin names (`dl plugins` lists them and their options).
        source_options, loader_options, decoder_options: keyword options of those plugins' factories
            (e.g. `loader_options={"episode_pool_size": 32}` for `pool`).
        **config: `dl.LoaderConfig` fields: episodes, delta_timestamps, image_dtype, tolerance_s, seed, rank,
            world_size.

    Returns:
        A `torch.utils.data.Dataset` (`map`) or `IterableDataset` (`pool`) satisfying `dl.contracts.loader.Loader`,
        yielding LeRobot-compatible sample dicts (see docs/library.md).

    Raises:
        PluginError: an unknown plugin name or an option it does not take (the message lists the accepted
            ones). DatasetFormatError, MissingFilesError: a bad dataset. DlError: a keyword `LoaderConfig` does not
            take (for LeRobot's own, such as `video_backend=`, the message says what dl takes instead).
    """
    check_config_keys(config)
    return assemble(root, source=source, loader=loader, decoder=decoder, source_options=source_options,
                    loader_options=loader_options, decoder_options=decoder_options,
                    config=LoaderConfig(**config)).loader


def make_dataloader(dataset, *, batch_size: int | None = 16, num_workers: int = 0, **kwargs):
    """A DataLoader for a dl loader, built the way `dl run` builds it: the loader's order (its sampler,
    seeded per epoch and sharded per rank), what its decoder and source need (start method,
    `pin_memory`), and `dl.ResumableDataLoader` (`state_dict()` / `load_state_dict()`) for loaders that
    resume. `kwargs` go to `dl.dataloader.build.build_dataloader` (seed, prefetch_factor, persistent_workers,
    other DataLoader arguments).

    Raises:
        PluginError: the plugins' needs contradict each other or `kwargs`.
    """
    return build_dataloader(dataset, batch_size=batch_size, num_workers=num_workers, **kwargs)


LEROBOT_ARGUMENTS = {
    "video_backend": 'decoder="cpu" (torchcodec) or decoder="nvdec"',
    "return_uint8": 'image_dtype="uint8"',
    "image_transforms": "dataset.set_image_transforms(transforms) on the dataset returned",
    "revision": 'source="hub", source_options={"revision": ...}',
    "repo_id": 'the repo id as root, with source="hub"',
    "download_videos": "nothing: sources read the videos' byte ranges as needed",
    "force_cache_sync": "nothing: the hub source pins the revision's commit once",
}
"""LeRobotDataset's keyword arguments that `make_dataset` does not take, and what dl takes instead."""


def check_config_keys(config: dict) -> None:
    """Refuse keywords `LoaderConfig` has no field for, in one line naming what dl takes (`LEROBOT_ARGUMENTS` for
    LeRobot's own).

    Raises:
        DlError: naming each such keyword.
    """
    fields = {f.name for f in dataclasses.fields(LoaderConfig)}
    unknown = [k for k in config if k not in fields]
    if not unknown:
        return
    said = [f"{k}= (use {LEROBOT_ARGUMENTS[k]})" if k in LEROBOT_ARGUMENTS else f"{k}=" for k in unknown]
    raise DlError(f"make_dataset does not take {', '.join(said)}; its options are source, loader, decoder, "
                  f"source_options, loader_options, decoder_options and {', '.join(sorted(fields))}.")
