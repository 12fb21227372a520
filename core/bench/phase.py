"""What every phase of a benchmark run shares: the progress callback it reports through and the error a phase
raises when it produced nothing to measure."""

from collections.abc import Callable

from ..contracts.errors import DlError

Progress = Callable[[str, float, float | None], None]
"""`progress(phase, done, total)`: called as the run advances (phase names: "prepare", "decode ceiling",
"single-process", "warm-up", "steady window"; and, beside them, "download MB" with no total (None) while a remote
source fetches)."""


class RunFailed(DlError):
    """The run produced no samples or its loader raised; the message says which phase."""


def no_progress(phase: str, done: float, total: float | None) -> None:
    """A `Progress` that reports nothing."""
