"""The `slurm` scheduler: submit a chain of runs with `sbatch`, follow it with `scontrol`, stop it with
`scancel`."""

import os
import sys
from pathlib import Path

from dl.contracts.errors import DlError
from dl.contracts.scheduler import Run, RunStatus, Scheduler, Submission

from .jobs import job_status, show_jobs, slurm_command
from .script import job_name, job_script, sbatch_options, task_script


class SlurmScheduler(Scheduler):
    """Each run is one `sbatch` job, submitted in order, each depending `afterany` on the one before, so
    the runs of one `dl run` never overlap (network- or disk-bound runs would disturb each other) and a
    failed run does not stop the later ones. A run's job asks for its resources (`Run.resources`: nodes,
    tasks per node, cores per task, memory, time, GPUs) and starts its ranks with `srun`, one task per
    rank; the ranks read rank and world size from SLURM's environment and meet at the first node's
    address. Output goes to `LOG_DIR/%x-%j.out` (the folder is created before submitting: SLURM fails a
    job whose output folder is missing without writing any log).

    Before submitting anything, every job is checked with `sbatch --test-only`, so a request the cluster
    can never satisfy (more nodes or memory than a partition has, with `EnforcePartLimits`) is an error
    naming the run, and nothing is queued. `submit` returns at once; `status` reads the jobs back with
    `scontrol` (no accounting daemon needed), `cancel` runs `scancel`.

    Args:
        partition: the partition (default: `SLURM_PARTITION` from the environment, else the cluster's).
        account: the account to charge (default: `SLURM_ACCOUNT`).
        qos: the quality of service (default: `SLURM_QOS`).
        python: the Python the nodes run dl with (default: this one, e.g. the venv's, on a shared disk).
        setup: shell lines each job runs first, e.g. "module load ffmpeg" (POSIX sh).
        log_dir: where job logs go (default: OUT_DIR/logs, beside the results).
        chain: submit each run after the previous one ended (afterany); False lets them run at once.
    """

    name = "slurm"
    queues = True

    def __init__(self, partition: str | None = None, account: str | None = None, qos: str | None = None,
                 python: str | None = None, setup: str = "", log_dir: str | None = None, chain: bool = True):
        self.partition = partition or os.environ.get("SLURM_PARTITION")
        self.account = account or os.environ.get("SLURM_ACCOUNT")
        self.qos = qos or os.environ.get("SLURM_QOS")
        self.python, self.setup, self.log_dir, self.chain = python or sys.executable, setup, log_dir, bool(chain)

    # ------------------------------------------------------------------------------------------ submit
    def submit(self, runs: list[Run]) -> Submission:
        """Write, check (`--test-only`), then queue every run's job, in order.

        Raises:
            DlError: sbatch refused a job (the message names the run, its resources and sbatch's reason);
                when that happens after some jobs were queued, those are cancelled first.
        """
        scripts = {run.name: self._write(run) for run in runs}
        for run in runs:
            self._check(run, scripts[run.name])
        jobs: dict[str, str] = {}
        previous = None
        for run in runs:
            for path in run.result_paths:  # a result left from an earlier submission would pass for this one
                Path(path).unlink(missing_ok=True)
            args = ["sbatch", "--parsable"]
            if self.chain and previous:
                args.append(f"--dependency=afterany:{previous}")
            done = slurm_command([*args, scripts[run.name]])
            if done.returncode != 0:
                if jobs:
                    slurm_command(["scancel", *jobs.values()])
                raise DlError(f"sbatch refused run {run.name} ({_asked(run)}): {_message(done)}"
                              + (f"; cancelled the {len(jobs)} job(s) already queued" if jobs else ""))
            previous = jobs[run.name] = done.stdout.strip().split(";")[0]
        return Submission(self.name, runs, {"jobs": jobs, "log_dir": self._log_dir(runs[0]) if runs else None,
                                            "scripts": scripts})

    def _log_dir(self, run: Run) -> str:
        """`log_dir`, else `OUT_DIR/logs` (the spec is `OUT_DIR/specs/NAME.json`)."""
        return str(Path(self.log_dir or Path(run.spec_path).resolve().parent.parent / "logs").resolve())

    def _write(self, run: Run) -> str:
        log_dir = self._log_dir(run)
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        base = Path(run.spec_path).resolve().with_suffix("")
        task = base.with_name(f"{base.name}.task.sh")
        task.write_text(task_script(run, self.python))
        job = base.with_name(f"{base.name}.sbatch")
        options = sbatch_options(run, log_dir, self.partition, self.account, self.qos)
        job.write_text(job_script(run, options, str(task), self.setup, self.python))
        return str(job)

    def _check(self, run: Run, script: str) -> None:
        done = slurm_command(["sbatch", "--test-only", script])
        if done.returncode != 0:
            raise DlError(f"the cluster cannot run {run.name} as asked ({_asked(run)}): {_message(done)}. Ask for "
                          "less (--resource KEY=VALUE) or another partition (--scheduler-option partition=NAME); "
                          "nothing was submitted.")

    # ------------------------------------------------------------------------------------------ follow
    def status(self, submission: Submission) -> list[RunStatus]:
        jobs, known = submission.handle["jobs"], show_jobs()
        out = []
        for run in submission.runs:
            job_id = jobs[run.name]
            log = str(Path(submission.handle["log_dir"]) / f"{job_name(run)}-{job_id}.out")
            written = all(Path(p).is_file() for p in run.result_paths)
            out.append(job_status(run.name, job_id, known.get(job_id), log, written))
        return out

    def cancel(self, submission: Submission, names: list[str] | None = None) -> None:
        """`scancel` the jobs of the named runs (None: all); later links of the chain still run (afterany).

        Raises:
            DlError: an unknown run name, or scancel failed.
        """
        jobs = submission.handle["jobs"]
        unknown = sorted(set(names or ()) - set(jobs))
        if unknown:
            raise DlError(f"no run named {', '.join(unknown)} in this submission; runs: {', '.join(jobs)}.")
        done = slurm_command(["scancel", *(jobs[n] for n in (names or jobs))])
        if done.returncode != 0:
            raise DlError(f"scancel failed: {_message(done)}")


def _asked(run: Run) -> str:
    return ", ".join(f"{k}={v}" for k, v in run.resources.items()) or "no resources"


def _message(done) -> str:
    return " ".join((done.stderr or done.stdout).strip().splitlines()) or f"exit status {done.returncode}"
