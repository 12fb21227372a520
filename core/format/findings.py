"""What `dl validate` finds: `Finding`s collected in a `Validation`, and warnings raised by the checks recorded as
findings (`collected`)."""

import warnings
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One problem: `severity` "error" (`dl run` would fail or serve wrong values, or a file is unusable) or
    "warning" (LeRobot serves it and so does dl, with the values stored), the `path` it concerns (relative to the
    root; "" for the dataset), the `episodes` affected, and the `message`."""

    severity: str
    path: str
    message: str
    episodes: tuple[int, ...] = field(default_factory=tuple)


@dataclass
class Validation:
    """What `validate` found and did: `findings`; the `episodes` checked; video frames and images decoded and the
    seconds it took (`decode_s`); the largest gap between a row's timestamp and its camera frame, with its episode
    (`largest_gap`, None without cameras)."""

    findings: list[Finding] = field(default_factory=list)
    episodes: list[int] = field(default_factory=list)
    frames_decoded: int = 0
    images_decoded: int = 0
    decode_s: float = 0.0
    largest_gap: tuple[float, int] | None = None
    _warned: dict[str, list[str]] = field(default_factory=dict)  # text with its file as {file} -> the files

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def warn(self, text: str, path: str = "") -> None:
        """Record a warning; the same text about several files (`path` in it) becomes one finding (`finish`)."""
        self._warned.setdefault(text.replace(path, "{file}") if path else text, []).append(path)

    def finish(self) -> None:
        """Turn the recorded warnings into findings, one per text, naming the first file and counting the rest."""
        for text, paths in self._warned.items():
            paths = sorted(set(paths))
            more = f" (the same for {len(paths) - 1} more file(s), up to {paths[-1]})" if len(paths) > 1 else ""
            self.findings.append(Finding("warning", "", text.replace("{file}", paths[0]).rstrip(".") + more + "."))
        self._warned = {}

    def good_episodes(self) -> list[int]:
        """The checked episodes no error concerns."""
        broken = {e for f in self.errors for e in f.episodes}
        return [e for e in self.episodes if e not in broken]


class collected:
    """Record the warnings raised inside as `out.warn(text, path)` (`path`: the file they may concern)."""

    def __init__(self, out: Validation, path: str = ""):
        self.out, self.path = out, path

    def __enter__(self):
        self.catcher = warnings.catch_warnings(record=True)
        self.caught = self.catcher.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self.catcher.__exit__(*exc)
        for w in self.caught:
            self.out.warn(str(w.message), self.path)
        return False
