"""What a loader is asked to produce, independent of which loader produces it."""

from dataclasses import dataclass, field

IMAGE_DTYPES = ("float32", "uint8")


@dataclass(frozen=True)
class LoaderConfig:
    """Options every loader honours.

    Attributes:
        episodes: episode indices to load; None loads all (every file they need must exist).
        delta_timestamps: `{key: [offsets in seconds]}`; each key then yields `[T, ...]` plus a bool
            `{key}_is_pad [T]` (LeRobot's convention). Offsets must be multiples of 1/fps.
        image_dtype: "float32" gives camera frames in [0, 1] (LeRobot's format); "uint8" gives raw [0, 255].
        tolerance_s: the largest allowed gap (seconds) between a queried timestamp and the decoded frame's
            (LeRobot's default, 1e-4 s).
        seed: seeds any randomness the loader owns.
        options: loader-specific options (e.g. `episode_pool_size` for `pool`).
    """

    episodes: list[int] | None = None
    delta_timestamps: dict[str, list[float]] | None = None
    image_dtype: str = "float32"
    tolerance_s: float = 1e-4
    seed: int = 0
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.image_dtype not in IMAGE_DTYPES:
            raise ValueError(f"image_dtype must be one of {IMAGE_DTYPES}, got {self.image_dtype!r}")
