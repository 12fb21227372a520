"""Scheduler `local`: runs benchmark specs on this machine, one after another, each in a fresh process."""

import json
import subprocess
import sys
from pathlib import Path

from dl.hookspecs import hookimpl
from dl.scheduler import Scheduler
from dl.spec import RunSpec


class LocalScheduler(Scheduler):
    """One fresh `python -m dl.benchmark` process per spec, sequentially, so runs never share decoders,
    page cache warm-up aside, or memory peaks. The child's progress bar goes to this terminal.

    Args:
        timeout_s: kill a run that takes longer than this (seconds); it is recorded as failed.
    """

    name = "local"

    def __init__(self, timeout_s: float = 3600.0):
        self.timeout_s = timeout_s

    def run(self, specs: list[RunSpec], out_dir: Path) -> list[Path]:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for spec in specs:
            spec_path, result_path = out_dir / f"{spec.name}.spec.json", out_dir / f"{spec.name}.json"
            spec_path.write_text(json.dumps(spec.to_dict(), indent=2))
            result_path.unlink(missing_ok=True)
            try:
                subprocess.run([sys.executable, "-m", "dl.benchmark", str(spec_path), str(result_path)],
                               timeout=self.timeout_s, check=False)
            except subprocess.TimeoutExpired:
                result_path.write_text(json.dumps({"name": spec.name, "status": "failed",
                                                   "error": f"timed out after {self.timeout_s} s"}))
            paths.append(result_path)
        return paths


@hookimpl
def register_schedulers(register):
    register("local", LocalScheduler, "runs each benchmark on this machine in a fresh process, in sequence")
