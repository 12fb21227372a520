"""A benchmark run's full configuration: which plugins, which data, how to iterate, how long to measure."""

import dataclasses
from dataclasses import dataclass, field

MODES = ("single", "sarm", "chunk")
SECRET_WORDS = ("key", "secret", "token", "password", "credential")
REDACTED = "<redacted>"


@dataclass
class RunSpec:
    """Everything one `dl run` measurement needs; JSON-serializable, so a scheduler can ship it to a fresh
    process or a cluster node.

    What to load: `source`, `root` (None until the host resolves the embedded default dataset), `episodes`
    (None: all), `mode` (see `dl.bench.modes`), `delta_timestamps` (extra `{key: [s]}` windows, applied
    over the mode's), `features` (None: all), `image_dtype`, `tolerance_s`, `frame_pairing`, `strict`
    (`dl.contracts.config.LoaderConfig`);
    `metadata_snapshot`: the `metadata.json` of the `DatasetMeta.write_snapshot()` the host wrote, so the run reads
    no metadata itself.
    Which plugins: `loader`, `decoder`, `scheduler`, and their `*_options`; `world_size` ranks (each a
    process of a torch.distributed gloo group when > 1); `resources`, what the run asks of a cluster
    (`dl.contracts.scheduler.RESOURCES`: nodes, tasks_per_node, cpus_per_task, mem, time, gpus; completed by
    `dl.bench.resources.run_resources`).
    How to iterate: `batch_size`, `num_workers`, `prefetch_factor`, `seed`.
    How to measure: the DataLoader's warm-up, at least `warmup_batches` batches and `warmup_s` seconds (skipped),
    then `duration` (the steady-state window, s); in one process without workers, `single_proc_warmup_s` seconds
    untimed, then at least `single_proc_s` seconds and `single_proc_samples` samples timed (`dl.bench.steady`);
    `ceiling_s` (seconds spent measuring the machine's decode ceiling for the dataset, half on random single frames
    and half on whole episodes in order, each the best of several trials, at most half the window; 0 skips it:
    `dl.bench.ceiling`), `out_dir`, `name`.
    `warned`: the dataset's warnings the host printed once for every run of the command (`dl.bench.session.
    stream_warnings`), which the runs do not print again.
    `repeat_of`: the configuration's name when this run is one of `dl run --repeats` (`dl.bench.repeats`).
    `decoder_calibration`: how the host picked the decoder when asked for `--decoder auto`
    (`dl.bench.calibrate`), None otherwise.
    A mixture (`dl run --mix`, `dl.bench.mixture_run`) leaves `root` None and lists its members in `mix`
    (`{"root", "source", "weight", "source_options", "metadata_snapshot"}` each), with `mix_options` (`weights`:
    "frames" or "episodes" when members give no weight, `rename`, `features`, `samples_per_epoch`).
    """

    source: str = "local"
    root: str | None = None
    loader: str = "map"
    decoder: str = "cpu"
    scheduler: str = "local"
    episodes: list[int] | None = None
    mode: str = "single"
    delta_timestamps: dict[str, list[float]] = field(default_factory=dict)
    features: list[str] | None = None
    image_dtype: str = "float32"
    tolerance_s: float = 1e-4
    frame_pairing: str = "timestamp"
    strict: bool = False
    batch_size: int = 16
    num_workers: int = 2
    world_size: int = 1
    prefetch_factor: int = 2
    warmup_batches: int = 3
    warmup_s: float = 2.0
    duration: float = 20.0
    single_proc_samples: int = 64
    single_proc_s: float = 4.0
    single_proc_warmup_s: float = 1.0
    ceiling_s: float = 3.0
    seed: int = 0
    scenario: str | None = None
    metadata_snapshot: str | None = None
    source_options: dict = field(default_factory=dict)
    loader_options: dict = field(default_factory=dict)
    decoder_options: dict = field(default_factory=dict)
    resources: dict = field(default_factory=dict)
    decoder_calibration: dict | None = None
    mix: list[dict] = field(default_factory=list)
    mix_options: dict = field(default_factory=dict)
    out_dir: str = "dl-results"
    name: str = ""
    repeat_of: str | None = None
    warned: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.name:
            ranks = f"-r{self.world_size}" if self.world_size > 1 else ""
            mixed = f"mix{len(self.mix)}-" if self.mix else ""
            self.name = f"{mixed}{self.scenario or self.loader}-{self.decoder}-{self.mode}-w{self.num_workers}{ranks}"

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready)."""
        return dataclasses.asdict(self)

    def public_dict(self) -> dict:
        """`to_dict` with every plugin option whose name holds a secret word (`SECRET_WORDS`, e.g. s3fs's `key`,
        `secret`, `token` inside `storage_options`) replaced by `REDACTED`, at any depth: what result files
        record, as they are shared and plotted. The spec files the scheduler ships keep the values (the run
        needs them); prefer credentials from the environment (AWS_*, HF_TOKEN), which dl writes nowhere."""
        data = self.to_dict()
        for kind in ("source_options", "loader_options", "decoder_options", "mix"):
            data[kind] = _redacted(data[kind])
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Inverse of `to_dict`; unknown keys are an error."""
        return cls(**data)


def _redacted(value):
    if isinstance(value, dict):
        return {k: REDACTED if any(w in str(k).lower() for w in SECRET_WORDS) else _redacted(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value
