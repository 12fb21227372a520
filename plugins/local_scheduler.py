"""Scheduler `local`: runs benchmark specs on this machine, one after another, each in a fresh process."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from dl.hookspecs import hookimpl
from dl.results import merge_ranks, read_results
from dl.scheduler import Scheduler
from dl.spec import RunSpec


class LocalScheduler(Scheduler):
    """One fresh `python -m dl.benchmark` process per spec, sequentially, so runs never share decoders,
    page cache warm-up aside, or memory peaks. The child's progress bar goes to this terminal. A spec with
    `world_size` > 1 starts that many rank processes at once, as a torch.distributed gloo group on
    127.0.0.1 (env:// rendezvous on a free local port); their results are merged into one more line.

    Args:
        timeout_s: kill a run that takes longer than this (seconds); it is recorded as failed.
    """

    name = "local"

    def __init__(self, timeout_s: float = 3600.0):
        self.timeout_s = timeout_s

    def run(self, specs: list[RunSpec], out_dir: Path) -> list[Path]:
        (out_dir / "specs").mkdir(parents=True, exist_ok=True)
        paths = []
        for spec in specs:
            spec_path = out_dir / "specs" / f"{spec.name}.json"
            spec_path.write_text(json.dumps(spec.to_dict(), indent=2))
            if spec.world_size == 1:
                paths.append(self._launch(spec, spec_path, out_dir / f"{spec.name}.json", {}))
                continue
            ranks = self._launch_ranks(spec, spec_path, out_dir)
            merged = out_dir / f"{spec.name}.json"
            merged.write_text(json.dumps(merge_ranks(spec.name, read_results(ranks)), indent=2))
            paths.extend([*ranks, merged])
        return paths

    def _launch(self, spec: RunSpec, spec_path: Path, result_path: Path, env: dict) -> Path:
        result_path.unlink(missing_ok=True)
        try:
            subprocess.run([sys.executable, "-m", "dl.benchmark", str(spec_path), str(result_path)],
                           timeout=self.timeout_s, check=False, env={**os.environ, **env})
        except subprocess.TimeoutExpired:
            _write_failure(result_path, spec.name, f"timed out after {self.timeout_s} s")
        return result_path

    def _launch_ranks(self, spec: RunSpec, spec_path: Path, out_dir: Path) -> list[Path]:
        """All ranks at once, as one torch.distributed gloo group on 127.0.0.1."""
        port = _free_port()
        procs, paths = [], []
        for rank in range(spec.world_size):
            path = out_dir / f"{spec.name}-rank{rank}.json"
            path.unlink(missing_ok=True)
            env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(spec.world_size),
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
            procs.append(subprocess.Popen([sys.executable, "-m", "dl.benchmark", str(spec_path), str(path)], env=env))
            paths.append(path)
        deadline = time.monotonic() + self.timeout_s
        for proc, path in zip(procs, paths, strict=True):
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                _write_failure(path, path.stem, f"timed out after {self.timeout_s} s")
        return paths


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_failure(path: Path, name: str, error: str) -> None:
    path.write_text(json.dumps({"name": name, "status": "failed", "error": error}))


@hookimpl
def register_schedulers(register):
    register("local", LocalScheduler, "runs each benchmark on this machine in a fresh process, in sequence")
