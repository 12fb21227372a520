"""The scheduler interface: run benchmark specs somewhere and hand back their result files."""

from abc import ABC, abstractmethod
from pathlib import Path

from .spec import RunSpec


class Scheduler(ABC):
    """Runs each RunSpec in a fresh process (`python -m dl.benchmark SPEC RESULT`) on some machine(s)."""

    name: str

    @abstractmethod
    def run(self, specs: list[RunSpec], out_dir: Path) -> list[Path]:
        """Run every spec (a failing run does not stop the others) and return one result JSON path per
        spec, in order. A failed run's file holds `{"status": "failed", "error": ...}`."""
