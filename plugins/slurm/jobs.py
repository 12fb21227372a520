"""SLURM job states read back with `scontrol -o show job` (one line of KEY=VALUE per job), which, unlike
`sacct`, needs no accounting daemon: slurmctld keeps a finished job for `MinJobAge` seconds (300 by
default) after it ended."""

import re
import subprocess

from dl.contracts.errors import DlError
from dl.contracts.scheduler import RunStatus

STATE_MAP = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending", "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending", "RESV_DEL_HOLD": "pending",
    "RUNNING": "running", "COMPLETING": "running", "SIGNALING": "running", "STAGE_OUT": "running",
    "RESIZING": "running", "SUSPENDED": "running", "STOPPED": "running",
    "COMPLETED": "done", "CANCELLED": "cancelled",
    "FAILED": "failed", "TIMEOUT": "failed", "NODE_FAIL": "failed", "PREEMPTED": "failed", "BOOT_FAIL": "failed",
    "DEADLINE": "failed", "OUT_OF_MEMORY": "failed", "SPECIAL_EXIT": "failed",
}
"""SLURM's job states (`squeue --help`) -> dl's (`dl.contracts.scheduler.STATES`)."""

_FIELD = re.compile(r"(\w[\w/:]*)=(\S*)")


def slurm_command(args: list[str], timeout_s: float = 60) -> subprocess.CompletedProcess:
    """Run a SLURM client command (text output).

    Raises:
        DlError: the command is not installed, or did not answer within `timeout_s`.
    """
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise DlError(f"{args[0]} not found: the slurm scheduler needs SLURM's client commands (sbatch, squeue, "
                      "scontrol, scancel) on PATH, on a machine that can reach the cluster.") from None
    except subprocess.TimeoutExpired:
        raise DlError(f"`{' '.join(args)}` did not answer within {timeout_s} s; is slurmctld reachable?") from None


def show_jobs() -> dict[str, dict[str, str]]:
    """Every job slurmctld knows, `{job id: {field: value}}` (JobState, ExitCode, Reason, StdOut...).

    Raises:
        DlError: scontrol failed (its message is kept).
    """
    done = slurm_command(["scontrol", "-o", "show", "job"])
    if done.returncode != 0:
        if "No jobs in the system" in done.stdout + done.stderr:
            return {}
        raise DlError(f"scontrol show job failed: {(done.stderr or done.stdout).strip()}")
    jobs = {}
    for line in done.stdout.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" in fields:
            jobs[fields["JobId"]] = fields
    return jobs


def job_status(name: str, job_id: str, job: dict[str, str] | None, log_path: str, results_written: bool) -> RunStatus:
    """A run's status from its job's fields (None: slurmctld no longer lists it)."""
    if job is None:
        if results_written:
            return RunStatus(name, "done", 0, job_id, log_path, "no longer listed by slurmctld; its results exist")
        return RunStatus(name, "failed", None, job_id, log_path,
                         "no longer listed by slurmctld (it forgets jobs MinJobAge seconds after they end) and "
                         "it wrote no result; see its log")
    slurm_state = job.get("JobState", "UNKNOWN")
    state = STATE_MAP.get(slurm_state, "failed")
    code, _, sig = job.get("ExitCode", "").partition(":")
    exit_code = int(code) if state in ("done", "failed", "cancelled") and code.isdigit() else None
    detail = None
    if state == "failed":
        detail = f"SLURM state {slurm_state}"
        if slurm_state == "TIMEOUT":
            detail += f" (time limit {job.get('TimeLimit')})"
        if sig.isdigit() and int(sig):
            detail += f", killed by signal {sig}"
        reason = job.get("Reason")
        if reason and reason != "None":
            detail += f", reason {reason}"
    elif state == "pending" and job.get("Reason") not in (None, "None"):
        detail = f"waiting: {job['Reason']}"
    if job.get("Restarts", "0") not in ("0", ""):
        detail = f"{detail + '; ' if detail else ''}requeued {job['Restarts']} time(s)"
    return RunStatus(name, state, exit_code, job_id, job.get("StdOut") or log_path, detail)
