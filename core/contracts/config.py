"""What a loader is asked to produce, independent of which loader produces it."""

from dataclasses import dataclass

IMAGE_DTYPES = ("float32", "uint8")
DEPTH_UNITS = ("mm", "m")


@dataclass(frozen=True)
class LoaderConfig:
    """Options every loader honours (a loader's own options are keyword arguments of its factory).

    Attributes:
        episodes: episode indices to load; None loads all (every file they need must exist).
        delta_timestamps: `{key: [offsets in seconds]}`; each key then yields `[T, ...]` plus a bool
            `{key}_is_pad [T]` (LeRobot's convention). Offsets must be multiples of 1/fps.
        image_dtype: "float32" gives camera frames in [0, 1] (LeRobot's format); "uint8" gives raw [0, 255].
            Depth cameras are served as depth whatever this says (float32, `depth_output_unit`).
        depth_output_unit: the unit depth cameras are served in, "mm" (whole millimetres, LeRobot's default) or
            "m" (LeRobot 0.6.1's `depth_output_unit`): float32 `[1, H, W]`.
        features: the features a sample carries (exact keys or shell-style globs such as `observation.images.*`),
            or None: all. Cameras not selected are never opened or decoded, columns not selected never read (the
            bookkeeping keys timestamp, frame_index, episode_index, index, task_index and `task` are always served);
            `delta_timestamps` may only name selected keys (`dl.format.feature_selection`).
        tolerance_s: a camera frame is served when its timestamp is less than this many seconds from the row's
            (LeRobot's `tolerance_s`, default 1e-4 s); raise it for recorded (wall-clock) timestamps.
        frame_pairing: which camera frame a row gets: "timestamp" (LeRobot's: the frame nearest the row's timestamp
            within `tolerance_s`) or "row" (row i of an episode gets frame i of its span, delta_timestamps windows
            count frames: for recorded timestamps that drift from a video holding one frame per row;
            `dl.format.timestamp_checks`).
        strict: refuse data LeRobot serves as stored but that is likely wrong (NaN or inf in float features)
            instead of warning about it.
        seed: seeds every order the loader draws (shuffle, partition), with the epoch.
        rank, world_size: this process's share of the data in a distributed job; None (both) resolves them
            with `dl.dataloader.world.resolve_ranks` (torch.distributed, accelerate, RANK/WORLD_SIZE, SLURM).
    """

    episodes: list[int] | None = None
    delta_timestamps: dict[str, list[float]] | None = None
    image_dtype: str = "float32"
    depth_output_unit: str = "mm"
    features: tuple[str, ...] | None = None
    tolerance_s: float = 1e-4
    frame_pairing: str = "timestamp"
    strict: bool = False
    seed: int = 0
    rank: int | None = None
    world_size: int | None = None

    def __post_init__(self):
        if self.image_dtype not in IMAGE_DTYPES:
            raise ValueError(f"image_dtype must be one of {IMAGE_DTYPES}, got {self.image_dtype!r}")
        if self.frame_pairing not in ("timestamp", "row"):
            raise ValueError(f"frame_pairing must be \"timestamp\" or \"row\", got {self.frame_pairing!r}")
        if self.features is not None:
            if isinstance(self.features, str) or not all(isinstance(f, str) and f for f in self.features):
                raise ValueError(f"features must be a list of feature keys or patterns, got {self.features!r}")
            object.__setattr__(self, "features", tuple(self.features))
        if self.depth_output_unit not in DEPTH_UNITS:
            raise ValueError(f"depth_output_unit must be one of {DEPTH_UNITS}, got {self.depth_output_unit!r}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if not (isinstance(self.tolerance_s, int | float) and 0 < self.tolerance_s < float("inf")):
            raise ValueError(f"tolerance_s must be a positive number of seconds, got {self.tolerance_s!r}")
