"""Scheduler `local`: runs benchmark runs on this machine, one after another, each in a fresh process."""

import contextlib
import os
import signal
import subprocess
import time

import psutil

from dl.contracts.hookspecs import hookimpl
from dl.contracts.scheduler import Run, RunStatus, Scheduler, Submission
from dl.dataloader.rendezvous import hosted_store


class LocalScheduler(Scheduler):
    """One fresh `python -m dl.bench.runner` process per run, sequentially, so runs never share decoders,
    page cache warm-up aside, or memory peaks. The child's progress bar goes to this terminal. A run with
    `world_size` > 1 starts that many rank processes at once, as a torch.distributed gloo group on
    127.0.0.1 that meets at a store this process hosts on a port the system picks and keeps for the run
    (`dl.dataloader.rendezvous`: no other process can take it between choosing and binding).

    `submit` blocks until every run has ended (this machine runs one at a time); `status` then reports
    each run's exit code from the submission.

    Args:
        timeout_s: kill a run that takes longer than this (seconds); it is reported as failed.
    """

    name = "local"

    def __init__(self, timeout_s: float = 3600.0):
        self.timeout_s = timeout_s

    def submit(self, runs: list[Run]) -> Submission:
        submission = Submission(self.name, runs, {"exit_codes": {}, "details": {}})
        for run in runs:
            code, detail = self._launch(run)
            submission.handle["exit_codes"][run.name] = code
            if detail:
                submission.handle["details"][run.name] = detail
        return submission

    def status(self, submission: Submission) -> list[RunStatus]:
        codes, details = submission.handle["exit_codes"], submission.handle["details"]
        out = []
        for run in submission.runs:
            code = codes.get(run.name)
            state = "pending" if code is None else "done" if code == 0 else "failed"
            out.append(RunStatus(run.name, state, code, detail=details.get(run.name)))
        return out

    def _launch(self, run: Run) -> tuple[int, str | None]:
        """Start every rank of `run` at once (hosting their rendezvous store) and wait; (the worst exit code, what
        went wrong)."""
        for path in run.result_paths:
            if os.path.exists(path):
                os.remove(path)
        with contextlib.ExitStack() as stack:
            env = {**os.environ}
            if run.world_size > 1:
                env.update(stack.enter_context(hosted_store("127.0.0.1")), WORLD_SIZE=str(run.world_size))
            return self._wait(run, env)

    def _wait(self, run: Run, env: dict) -> tuple[int, str | None]:
        # each run process in a session of its own: the terminal's Ctrl-C reaches this process alone, which stops the
        # runs (`_stop`), so none is interrupted half-started (in `import torch`) and prints a traceback
        procs = [subprocess.Popen(run.command(rank), start_new_session=True,
                                  env={**env, **({"RANK": str(rank), "LOCAL_RANK": str(rank)} if run.world_size > 1
                                                 else {})})
                 for rank in range(run.world_size)]
        deadline = time.monotonic() + self.timeout_s
        codes, detail = [], None
        try:
            for proc in procs:
                try:
                    codes.append(proc.wait(timeout=max(deadline - time.monotonic(), 1)))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    codes.append(proc.wait())
                    detail = f"timed out after {self.timeout_s} s"
        except BaseException:  # Ctrl-C or SIGTERM in this process: the runs must not outlive it
            _stop(procs)
            raise
        worst = next((c for c in codes if c != 0), 0)
        if detail is None and worst < 0:
            detail = f"killed by signal {_signal_name(-worst)}"
        return worst, detail


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _stop(procs: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    """Stop the run processes and everything they started: SIGTERM each one still alive (a run process is in a
    session of its own, so this is how a Ctrl-C reaches it; each stops its DataLoader workers on the way out, one
    still importing ends at once, see `dl.bench.signals`),
    SIGKILL those that have not exited after `grace_s` seconds, then SIGKILL any descendant still alive (a
    worker orphaned by that would otherwise keep running and hold the terminal's output open)."""
    descendants = []
    for proc in procs:
        try:
            descendants += psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for child in descendants:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


@hookimpl
def register_schedulers(register):
    register("local", LocalScheduler, "runs each benchmark on this machine in a fresh process, in sequence")
