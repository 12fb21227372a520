"""`LeRobotMeta`: a dl loader's metadata under the names and meanings of LeRobot's `LeRobotDatasetMetadata`, which
lerobot-train, `make_policy(ds_meta=...)` and `make_pre_post_processors(dataset_stats=..., dataset_meta=...)` read."""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..contracts.errors import DlError, warn
from ..format.columns import LANGUAGE_FIELDS
from ..format.metadata import DatasetMeta, stats_tensors

IMAGENET_STATS = {"mean": [[[0.485]], [[0.456]], [[0.406]]], "std": [[[0.229]], [[0.224]], [[0.225]]]}
"""LeRobot's `IMAGENET_STATS` (`lerobot.utils.constants`): per channel, shape (3, 1, 1), for frames in [0, 1]."""
MM_PER_METRE = 1000.0


class EpisodeTable(Mapping):
    """LeRobot's `meta.episodes` as lerobot-train reads it: columns by name, each indexed by episode index
    (`meta.episodes["dataset_from_index"][e]`): `episode_index`, `length`, `dataset_from_index`,
    `dataset_to_index` (int64 numpy arrays) and `tasks` (a list of each episode's task strings). An index no
    episode holds (a gap in meta/episodes) has zero frames.
    """

    def __init__(self, meta: DatasetMeta):
        columns = self._source = meta.columns
        size = int(columns.index.max()) + 1 if len(columns) else 0
        self._at = columns.index.astype(np.int64)
        self._columns: dict = {"episode_index": np.arange(size, dtype=np.int64)}
        for name in ("length", "dataset_from_index", "dataset_to_index"):
            filled = np.zeros(size, dtype=np.int64)
            filled[self._at] = getattr(columns, name)
            self._columns[name] = filled

    def _tasks(self) -> list[list[str]]:
        tasks: list[list[str]] = [[] for _ in range(len(self))]
        for e, task_set in zip(self._at.tolist(), self._source.task_set.tolist(), strict=True):
            tasks[e] = list(self._source.task_sets[task_set])
        return tasks

    def __getitem__(self, name: str):
        if name == "tasks" and name not in self._columns:  # built on first use: lerobot-train's eval split reads it
            self._columns["tasks"] = self._tasks()
        return self._columns[name]

    def __iter__(self):
        return iter(("episode_index", "length", "dataset_from_index", "dataset_to_index", "tasks"))

    def __len__(self) -> int:
        return len(self._columns["episode_index"])


class LeRobotMeta:
    """The metadata surface of LeRobot's `LeRobotDatasetMetadata` over dl's, for the features dl serves.

    Attributes (LeRobot's meaning for each):
        info: info.json; `fps`, `robot_type`, `total_frames`, `total_episodes`, `total_tasks` (the whole dataset).
        features: the served features `{key: {"dtype", "shape", "names", ...}}`, keys renamed (`rename`), without
            those dl leaves out.
        camera_keys, video_keys, image_keys, depth_keys: as LeRobot's (renamed).
        stats: `{feature: {stat: tensor}}` from meta/stats.json (renamed; depth stats in the unit depth is served in).
        episodes: an `EpisodeTable` (None for a mixture: its members' episodes are not one table).
        tasks: a pandas DataFrame indexed by task string with a `task_index` column, as LeRobot's.
        has_language_columns: the dataset has LeRobot 0.6's language columns (lerobot-train then collates with
            LeRobot's `lerobot_collate_fn`).
        repo_id, root: as lerobot-train was given them.
    """

    def __init__(self, info: dict, features: dict, stats: dict, tasks: dict[int, str], episodes: EpisodeTable | None,
                 repo_id: str, root: str | Path | None, depth_keys: list[str], tools: list | None = None):
        self.info, self.features, self.stats, self.episodes = info, features, stats, episodes
        self.repo_id, self.root = repo_id, None if root is None else Path(root) if "://" not in str(root) else root
        self.fps: int = info["fps"]
        self.robot_type = info.get("robot_type")
        self.total_frames: int = int(info.get("total_frames", 0))
        self.total_episodes: int = int(info.get("total_episodes", 0))
        self.total_tasks: int = len(tasks)
        self.camera_keys = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
        self.video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
        self.image_keys = [k for k, f in features.items() if f["dtype"] == "image"]
        self.depth_keys = [k for k in depth_keys if k in features]
        self.tasks = pd.DataFrame({"task_index": list(tasks)}, index=pd.Index(list(tasks.values()), name="task"))
        self.tools = list(tools or [])

    @property
    def has_language_columns(self) -> bool:
        """LeRobot 0.6's `language_persistent` / `language_events` columns are among the features."""
        return any(key in self.features for key in LANGUAGE_FIELDS)

    @property
    def names(self) -> dict:
        """Each feature's `names`."""
        return {key: feature.get("names") for key, feature in self.features.items()}

    @property
    def shapes(self) -> dict:
        """Each feature's shape, a tuple."""
        return {key: tuple(feature["shape"]) for key, feature in self.features.items()}

    def use_imagenet_stats(self) -> None:
        """Give every camera but depth ImageNet's mean and std, as lerobot-train's `--dataset.use_imagenet_stats`
        does. A camera meta/stats.json has no entry for gets one, said in one warning line (LeRobot raises a
        KeyError there)."""
        lacking = [key for key in self.camera_keys if key not in self.depth_keys and key not in self.stats]
        if lacking:
            warn(f"meta/stats.json of {self.repo_id} has no stats for camera(s) {', '.join(lacking)}: using "
                 "ImageNet's mean and std for them (--dataset.use_imagenet_stats). Compute the dataset's stats "
                 "with LeRobot to normalize by its own.")
        for key in self.camera_keys:
            if key in self.depth_keys:
                continue
            entry = self.stats.setdefault(key, {})
            for name, value in IMAGENET_STATS.items():
                entry[name] = torch.tensor(value, dtype=torch.float32)

    @classmethod
    def of_dataset(cls, meta: DatasetMeta, repo_id: str, root, rename: Mapping[str, str] | None = None,
                   depth_output_unit: str = "mm") -> "LeRobotMeta":
        """The LeRobot metadata of one dataset, its keys renamed by `rename` (`{dataset key: served key}`)."""
        rename = dict(rename or {})
        features = {rename.get(k, k): v for k, v in meta.features.items() if k not in meta.left_out}
        stats = stats_tensors({rename.get(k, k): v for k, v in meta.stats_document.items()})
        depth = [rename.get(k, k) for k in meta.depth]
        for key in depth:
            stored = (features[key].get("info") or {}).get("depth_unit")
            if key in stats and stored is not None and stored != depth_output_unit:
                factor = MM_PER_METRE if stored == "m" else 1.0 / MM_PER_METRE
                stats[key] = {n: v if n == "count" else v * factor for n, v in stats[key].items()}
        return cls(meta.info, features, stats, meta.tasks, EpisodeTable(meta), repo_id, root, depth, meta.tools)

    @classmethod
    def of_mixture(cls, mixture, repo_id: str) -> "LeRobotMeta":
        """The LeRobot metadata of a `dl.mixture.dataset.MixtureDataset`: its first member's features under the
        mixture's keys (those it serves), the members' stats aggregated as LeRobot aggregates datasets
        (`mixture.stats.aggregated()`), their frames and episodes summed.

        Raises:
            DlError: the members' fps differ (a policy's windows count frames at one fps).
        """
        fps = {m.meta.fps for m in mixture.members}
        if len(fps) > 1:
            raise DlError(f"mixture members record at {sorted(fps)} fps: lerobot-train trains at one fps. Mix datasets "
                          "of the same fps.")
        first, pairs = mixture.members[0].meta, dict(mixture.schema.pairs[0])
        own_to_served = {own: served for own, served in pairs.items() if own is not None}
        features = {own_to_served[k]: v for k, v in first.features.items() if k in own_to_served}
        info = {**first.info, "total_frames": int(sum(mixture.frames)), "total_episodes": len(mixture.episodes)}
        tasks = {}
        for member in mixture.members:
            for task in member.meta.tasks.values():
                tasks.setdefault(task, len(tasks))
        depth = [own_to_served[k] for k in first.depth if k in own_to_served]
        return cls(info, features, stats_tensors(mixture.stats.aggregated()), {i: t for t, i in tasks.items()}, None,
                   repo_id, None, depth, first.tools)
