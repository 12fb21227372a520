"""The datasets lerobot-train is handed: a dl loader under LeRobot's `LeRobotDataset` surface (`num_frames`,
`num_episodes`, `episodes`, `meta`, `absolute_to_relative_idx`, ...), its keys renamed as asked.

`LeRobotMapView` is map-style: lerobot-train orders it with LeRobot's own `EpisodeAwareSampler` (its seed, its
`drop_n_last_frames`, its resume). `LeRobotStreamView` is iterable (the `pool` loader, a mixture): `dl train`'s
Accelerator reads it through dl's own DataLoader, each rank its own share (`dl.lerobot.session`)."""

from collections.abc import Mapping

import numpy as np
import torch.utils.data

from ..format.episodes import EpisodeSelection
from .meta import LeRobotMeta


def renamed(sample: dict, rename: Mapping[str, str]) -> dict:
    """`sample` (or a batch) with its keys renamed (`{dataset key: served key}`), each `{key}_is_pad` with its key."""
    if not rename:
        return sample
    out = {}
    for key, value in sample.items():
        if key.endswith("_is_pad") and key[: -len("_is_pad")] in rename:
            key = f"{rename[key[: -len('_is_pad')]]}_is_pad"
        out[rename.get(key, key)] = value
    return out


class AbsoluteToRelative(Mapping):
    """LeRobot's `absolute_to_relative_idx` for a selection, without a dict of every frame: the global frame index
    (the `index` column) -> the position of that frame in the `map` loader (episodes ascending, as LeRobot's).

    Args:
        from_index: each selected episode's first global index, in selection order.
        lengths: each selected episode's frames.
    """

    def __init__(self, from_index: np.ndarray, lengths: np.ndarray):
        self._order = np.argsort(from_index, kind="stable")
        self._from = np.asarray(from_index, dtype=np.int64)[self._order]
        self._lengths = np.asarray(lengths, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)

    def __getitem__(self, index: int) -> int:
        k = int(np.searchsorted(self._from, index, side="right")) - 1
        if k < 0:
            raise KeyError(index)
        e = int(self._order[k])
        offset = int(index) - int(self._from[k])
        if not 0 <= offset < self._lengths[e]:
            raise KeyError(index)
        return int(self._starts[e]) + offset

    def __iter__(self):
        for first, e in zip(self._from.tolist(), self._order.tolist(), strict=True):
            yield from range(first, first + int(self._lengths[e]))

    def __len__(self) -> int:
        return int(self._lengths.sum())


class LeRobotSurface:
    """What LeRobot's `LeRobotDataset` says of itself, for a dl loader whose `meta` is a `LeRobotMeta`.

    Attributes:
        loader: the dl loader (`map`, `pool`, a mixture).
        meta: its `LeRobotMeta`.
        rename: `{dataset key: served key}` applied to every sample.
        episodes: the selected episode indices (ints; a mixture's repeat across members).
        num_frames, num_episodes: of the selection (LeRobot's `num_frames`, `num_episodes`).
    """

    def __init__(self, loader, meta: LeRobotMeta, rename: Mapping[str, str] | None = None):
        self.loader, self.meta, self.rename = loader, meta, dict(rename or {})
        selection = loader.episodes
        if isinstance(selection, EpisodeSelection):  # columns: no episode object built
            self.episodes: list[int] = selection.index.tolist()
            self.num_frames: int = int(selection.lengths.sum())
        else:  # a mixture's members' episodes, member by member
            self.episodes = [int(ep.index) for ep in selection]
            self.num_frames = int(sum(ep.length for ep in selection))
        self.num_episodes: int = len(self.episodes)

    @property
    def fps(self) -> int:
        return self.meta.fps

    @property
    def features(self) -> dict:
        return self.meta.features

    @property
    def camera_keys(self) -> list[str]:
        return self.meta.camera_keys

    @property
    def repo_id(self) -> str:
        return self.meta.repo_id

    @property
    def root(self):
        return self.meta.root


class LeRobotMapView(torch.utils.data.Dataset, LeRobotSurface):
    """The `map` loader as LeRobot's `LeRobotDataset`: position `i` is the i-th frame of the selected episodes in
    ascending episode order (LeRobot's relative index); `absolute_to_relative_idx` maps a global frame index to
    it, for LeRobot's `EpisodeAwareSampler`."""

    def __init__(self, loader, meta: LeRobotMeta, rename: Mapping[str, str] | None = None):
        LeRobotSurface.__init__(self, loader, meta, rename)
        selection = loader.episodes
        self.absolute_to_relative_idx = AbsoluteToRelative(selection.dataset_from_index, selection.lengths)

    def __len__(self) -> int:
        return len(self.loader)

    def __getitem__(self, i: int) -> dict:
        return renamed(self.loader[i], self.rename)


class LeRobotStreamView(torch.utils.data.IterableDataset, LeRobotSurface):
    """An iterable dl loader (`pool`, a mixture) as LeRobot's streaming dataset. Read it with `dl.make_dataloader(
    view.loader, ...)` and rename the batches (`renamed`), as `dl train` does; iterating the view itself gives the
    loader's samples renamed."""

    def __iter__(self):
        for sample in self.loader:
            yield renamed(sample, self.rename)
