"""The scheduler contract: submit benchmark runs somewhere, follow them, and say where their results are.

The host (`dl run`) writes each run's spec file and names its result file(s) (one per rank) before it
submits, so a scheduler only launches `Run.command(rank)` where it likes: here, in a subprocess
(`local`), or as cluster jobs. `submit` may return at once (a cluster queue) or after the runs ended
(`local`); `status` answers later, from the `Submission` alone, which is JSON-able so it can be saved
and followed from another process. Merging the ranks' results is the host's job (`dl.bench.results`).
"""

import json
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

from .errors import DlError

RUNNER = "dl.bench.runner"
"""The module every run executes: `python -m dl.bench.runner SPEC.json RESULT.json`."""

FINAL_STATES = ("done", "failed", "cancelled")
STATES = ("pending", "running", *FINAL_STATES)

RESOURCES = {
    "nodes": "nodes (machines) the run spans; its ranks are spread evenly over them",
    "tasks_per_node": "processes (ranks) per node; nodes x tasks_per_node = the run's world size",
    "cpus_per_task": "CPU cores per rank (default: DataLoader workers + 1)",
    "mem": "memory per node: an integer in MB, or a string with a unit such as 8G",
    "time": "time limit: minutes (an integer) or [D-]HH:MM:SS",
    "gpus": "GPUs per node",
}
"""What a run may ask of a cluster (`Run.resources`); schedulers that place work read the keys they know."""


@dataclass
class Run:
    """One benchmark run to launch.

    Attributes:
        name: the run's name (results are keyed on it).
        world_size: processes to start together (ranks of one torch.distributed gloo group when > 1); each
            needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (or the SLURM equivalents) in its environment.
        spec_path: the RunSpec JSON file.
        result_paths: where each rank writes its result JSON (rank order).
        resources: what the run asks of a cluster, keys of RESOURCES (nodes, tasks_per_node,
            cpus_per_task, mem, time, gpus); schedulers that place work read the keys they know.
        python: the interpreter the run needs (a peer loader's environment,
            `dl.contracts.loader.RunsInOwnEnvironment`); None: the scheduler's own.
    """

    name: str
    world_size: int
    spec_path: str
    result_paths: list[str]
    resources: dict = field(default_factory=dict)
    python: str | None = None

    def command(self, rank: int = 0, python: str | None = None) -> list[str]:
        """The command line of one rank: `python -m dl.bench.runner SPEC RESULT`, with the run's own interpreter,
        else `python` (the scheduler's), else this one."""
        return [self.python or python or sys.executable, "-m", RUNNER, self.spec_path, self.result_paths[rank]]


@dataclass
class RunStatus:
    """Where a run stands.

    Attributes:
        name: the run's name.
        state: one of STATES ("pending", "running", "done", "failed", "cancelled"); "done" means the
            process exited 0, not that the benchmark succeeded (its result file says that).
        exit_code: the process's exit code (the worst rank's), once known.
        job_id: the scheduler's id for it (a SLURM job id), if any.
        log_path: where its output went, if captured.
        detail: a scheduler's explanation (e.g. "killed by signal 9", "timed out after 3600 s").
    """

    name: str
    state: str
    exit_code: int | None = None
    job_id: str | None = None
    log_path: str | None = None
    detail: str | None = None


@dataclass
class Submission:
    """What `submit` hands back: the runs, in order, and the scheduler's own JSON-able handle (job ids,
    exit codes) from which `status` answers."""

    scheduler: str
    runs: list[Run]
    handle: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Submission":
        """Inverse of `to_dict`."""
        return cls(data["scheduler"], [Run(**r) for r in data["runs"]], data.get("handle", {}))

    def save(self, path) -> None:
        """Write as JSON (so `status` can be asked from another process)."""
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=2)


class Scheduler(ABC):
    """Launches runs: `submit` them, then `status` / `wait` follow them, `cancel` stops them.

    Every run is a fresh process (`Run.command`); a failing run must not stop the others.

    Attributes:
        name: the registered name.
        queues: True when `submit` returns before the runs end (a cluster queue): `dl run` then returns
            at once unless asked to `--wait`, and `dl status OUT_DIR` follows the runs.
    """

    name: str
    queues: bool = False

    @abstractmethod
    def submit(self, runs: list[Run]) -> Submission:
        """Start (or queue) every run, in order; return without waiting when the scheduler can."""

    @abstractmethod
    def status(self, submission: Submission) -> list[RunStatus]:
        """Each run's current status, in run order."""

    def cancel(self, submission: Submission, names: list[str] | None = None) -> None:
        """Stop the named runs (None: every run) that have not ended; they are then reported "cancelled".

        Raises:
            DlError: this scheduler cannot cancel (runs that `submit` already finished need none).
        """
        raise DlError(f"scheduler {self.name!r} cannot cancel runs: its submit returns when they have ended.")

    def wait(self, submission: Submission, poll_s: float = 2.0, timeout_s: float | None = None) -> list[RunStatus]:
        """Poll `status` until every run is in a final state (or `timeout_s` passes: then the last answer).

        Args:
            poll_s: seconds between polls.
            timeout_s: give up waiting after this many seconds (None: wait as long as it takes).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            statuses = self.status(submission)
            if all(s.state in FINAL_STATES for s in statuses):
                return statuses
            if deadline is not None and time.monotonic() >= deadline:
                return statuses
            time.sleep(poll_s)
