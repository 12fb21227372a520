"""What LeRobot's `LeRobotDataset` says of itself, under its names, for dl's loaders (`map`, `pool`): a trainer
written against LeRobot's dataset reads the same attributes from dl's."""

from pathlib import Path


class LeRobotNames:
    """`fps`, `features`, `camera_keys`, `num_frames`, `num_episodes`, `root`, `repo_id`, and
    `set_image_transforms`, for a loader with `meta` (a `dl.format.metadata.DatasetMeta`), `episodes` (its
    selection) and `builder` (its `dl.format.samples.SampleBuilder`)."""

    @property
    def fps(self) -> int:
        """Frames per second (info.json)."""
        return self.meta.fps

    @property
    def features(self) -> dict:
        """The features served: info.json's table less the features dl leaves out (`meta.left_out`)."""
        return {k: v for k, v in self.meta.features.items() if k not in self.meta.left_out}

    @property
    def camera_keys(self) -> list[str]:
        """Video and image keys, in info.json order."""
        return self.meta.camera_keys

    @property
    def num_frames(self) -> int:
        """Frames of the selected episodes (LeRobot's `num_frames`; `meta.total_frames` counts every episode)."""
        return int(self.episodes.lengths.sum())

    @property
    def num_episodes(self) -> int:
        """Selected episodes."""
        return len(self.episodes)

    @property
    def root(self) -> Path | str:
        """The dataset's folder (a local source), else its URL."""
        url = self.meta.source.url
        if url.startswith("file://"):
            return Path(url[len("file://"):])
        return Path(url) if "://" not in url else url

    @property
    def repo_id(self) -> str:
        """`OWNER/NAME` of a Hub dataset, else the last part of the root (LeRobot names local datasets so too)."""
        url = self.meta.source.url.rstrip("/")
        if url.startswith("hf://datasets/"):
            return url[len("hf://datasets/"):].split("@")[0]
        return url.rsplit("/", 1)[-1]

    def set_image_transforms(self, transforms) -> None:
        """Apply `transforms` (a callable on a camera's frames, e.g. LeRobot's `ImageTransforms`) to every camera
        but depth of each sample, as LeRobot's `LeRobotDataset.set_image_transforms` (`SampleBuilder.
        set_image_transforms`); None: none. Set it before building the DataLoader: workers take a copy."""
        self.builder.set_image_transforms(transforms)
