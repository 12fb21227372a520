"""`dl train`'s own arguments (`--dl.NAME=VALUE`), split from lerobot-train's, and where a checkpoint keeps them."""

import dataclasses
import json
from pathlib import Path

from ..contracts.errors import DlError

PREFIX = "--dl."
STATE_FILE = "dl_train.json"
"""Beside lerobot-train's `training_state/` files in each checkpoint: the `TrainOptions` and, with a streaming
loader, dl's DataLoader state (`dl.ResumableDataLoader.state_dict()`)."""
LOADERS = ("map", "pool")


@dataclasses.dataclass
class TrainOptions:
    """How `dl train` builds the dataset lerobot-train trains on.

    Attributes:
        loader: "map" (LeRobot's sampler orders it: its seed, `drop_n_last_frames`, its resume) or "pool" (dl's
            streaming episode pool: each rank reads its own share; resume from dl's loader state).
        source: "local", "hub" or "bucket" (default: "local" with `--dataset.root`, else "hub" with
            `--dataset.repo_id`); any registered source plugin.
        decoder: "cpu", "nvdec" or any registered decoder plugin.
        frame_pairing: `dl.LoaderConfig.frame_pairing` ("timestamp", LeRobot's, or "row").
        decode_budget: the `pool` loader's decode budget ("256M", "1G", "0"); None: its default.
        episode_pool_size: the `pool` loader's open episodes per consumer; None: its default.
        rename: `{dataset key: key served}` (e.g. `actions=action` for a dataset not using LeRobot's names).
        mix: `[(root or repo id, weight)]`: train on a `dl.make_mixture` of these datasets instead of
            `--dataset.root` (read with the `pool` loader).
        source_options: options of the source plugin (`dl plugins` lists them), values as JSON or strings.
    """

    loader: str = "map"
    source: str | None = None
    decoder: str = "cpu"
    frame_pairing: str = "timestamp"
    decode_budget: str | None = None
    episode_pool_size: int | None = None
    rename: dict = dataclasses.field(default_factory=dict)
    mix: list = dataclasses.field(default_factory=list)
    source_options: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.loader not in LOADERS:
            raise DlError(f"--dl.loader must be one of {', '.join(LOADERS)}, got {self.loader!r}.")
        if self.mix and self.loader != "pool":
            self.loader = "pool"  # a mixture streams: each rank reads its own share of every member

    @property
    def streams(self) -> bool:
        """The dataset is iterable (lerobot-train's `dataset.streaming`: no sampler, dl's order and resume)."""
        return self.loader == "pool"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, saved: dict, given: dict) -> "TrainOptions":
        """The options a checkpoint saved, overridden by those given on the command line (`given`, as parsed)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        merged = {k: v for k, v in saved.items() if k in fields}
        merged.update(given)
        merged["mix"] = [tuple(m) for m in merged.get("mix", [])]
        return cls(**merged)


def split_arguments(argv: list[str]) -> tuple[dict, list[str]]:
    """`(dl's options as given, lerobot-train's arguments)` from a `dl train` command line: `--dl.NAME=VALUE` or
    `--dl.NAME VALUE`; `rename`, `mix` and `source_option` may repeat or hold a comma-separated list.

    Raises:
        DlError: an unknown `--dl.` name, or a value that does not parse; the message lists the names.
    """
    given: dict = {}
    rest: list[str] = []
    args = iter(argv)
    names = ({f.name for f in dataclasses.fields(TrainOptions)} - {"source_options"}) | {"source_option"}
    for arg in args:
        if not arg.startswith(PREFIX):
            rest.append(arg)
            continue
        name, sep, value = arg[len(PREFIX):].partition("=")
        if not sep:
            value = next(args, None)
            if value is None:
                raise DlError(f"{arg} needs a value ({arg}=VALUE).")
        name = name.replace("-", "_")
        if name not in names:
            known = ", ".join(PREFIX + n for n in sorted(names))
            raise DlError(f"unknown option {PREFIX}{name}: dl train takes {known}.")
        _take(given, name, value)
    return given, rest


def _take(given: dict, name: str, value: str) -> None:
    if name == "rename":
        for pair in filter(None, value.split(",")):
            old, sep, new = pair.partition("=")
            if not sep or not old or not new:
                raise DlError(f"--dl.rename takes OLD=NEW pairs, got {pair!r}.")
            given.setdefault("rename", {})[old] = new
    elif name == "mix":
        for member in filter(None, value.split(",")):
            root, sep, weight = member.rpartition(":")
            try:
                given.setdefault("mix", []).append((root, float(weight)) if sep and "/" not in weight else
                                                   (member, 1.0))
            except ValueError:
                raise DlError(f"--dl.mix takes ROOT:WEIGHT (a positive number), got {member!r}.") from None
    elif name == "source_option":
        for pair in filter(None, value.split(",")):
            key, sep, raw = pair.partition("=")
            if not sep:
                raise DlError(f"--dl.source_option takes KEY=VALUE, got {pair!r}.")
            try:
                given.setdefault("source_options", {})[key] = json.loads(raw)
            except ValueError:
                given.setdefault("source_options", {})[key] = raw
    elif name == "episode_pool_size":
        try:
            given[name] = int(value)
        except ValueError:
            raise DlError(f"--dl.episode_pool_size takes a whole number, got {value!r}.") from None
    else:
        given[name] = value


def saved_state(checkpoint: str | Path) -> dict:
    """What `dl train` saved in `checkpoint` (a lerobot-train checkpoint folder): `{"options", "loader_state"}`, or
    {} when it holds none (a checkpoint of plain lerobot-train)."""
    path = Path(checkpoint) / "training_state" / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def save_state(checkpoint: str | Path, options: TrainOptions, loader_state: dict | None) -> None:
    """Write the options and the loader state into `checkpoint`'s `training_state/`."""
    folder = Path(checkpoint) / "training_state"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STATE_FILE).write_text(json.dumps({"options": options.to_json(), "loader_state": loader_state}))
