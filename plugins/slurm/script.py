"""The files a SLURM job of one run executes, both plain POSIX shell (`/bin/sh`, dash on Debian):

- the job script (`NAME.sbatch`): `#SBATCH` lines from the run's resources, the master address (the
  first node's `NodeAddr`, as `scontrol show node` reports it), then `srun` starting one task per rank; with
  more than one rank, through `dl.plugins.slurm.launch`, which hosts the ranks' rendezvous store on a port
  the system picks, on the first node, for the job's life;
- the task script (`NAME.task.sh`), which every task runs: it picks its rank's command line by
  `SLURM_PROCID` (each rank writes its own result file) and executes it. The runner then reads its rank
  and world size from `SLURM_PROCID` / `SLURM_NTASKS` (`dl.dataloader.world.resolve_ranks`).

Both live beside the run's spec in `OUT_DIR/specs/`, which, like the results, must be on a filesystem the
nodes share.
"""

import shlex

from dl.contracts.scheduler import Run


def job_name(run: Run) -> str:
    """`dl-NAME`: what `squeue` shows and `%x` in the log file name."""
    return f"dl-{run.name}"


def sbatch_options(run: Run, log_dir: str, partition: str | None, account: str | None,
                   qos: str | None) -> list[str]:
    """The `#SBATCH` options of a run: name, log file (`LOG_DIR/%x-%j.out`), nodes, tasks per node, cores per
    task, and the memory, time limit and GPUs when the run asks for them."""
    res = run.resources
    options = [f"--job-name={job_name(run)}", f"--output={log_dir}/%x-%j.out",
               f"--nodes={res.get('nodes', 1)}", f"--ntasks-per-node={res.get('tasks_per_node', run.world_size)}",
               f"--cpus-per-task={res.get('cpus_per_task', 1)}"]
    for key, flag in (("mem", "--mem"), ("time", "--time"), ("gpus", "--gpus-per-node")):
        if res.get(key) is not None:
            options.append(f"{flag}={res[key]}")
    for value, flag in ((partition, "--partition"), (account, "--account"), (qos, "--qos")):
        if value:
            options.append(f"{flag}={value}")
    return options


def job_script(run: Run, options: list[str], task_script: str, setup: str = "", python: str = "python3") -> str:
    """The batch script: `#SBATCH` options, `setup` lines (e.g. `module load ...`), the master address, then
    `srun` of the task script on every rank (with several ranks under `python -m dl.plugins.slurm.launch`,
    which hosts their rendezvous store; `python`: the interpreter with dl installed)."""
    srun = f"srun --kill-on-bad-exit=1 /bin/sh {shlex.quote(task_script)}"
    if run.world_size > 1:
        srun = f"exec {shlex.quote(python)} -m dl.plugins.slurm.launch {srun}"
    lines = ["#!/bin/sh", *(f"#SBATCH {o}" for o in options),
             f"# dl run {run.name}: {run.world_size} rank(s); written by dl's slurm scheduler", ""]
    if setup:
        lines += [setup, ""]
    lines += [
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'MASTER_ADDR=$(scontrol show node "$first" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')',
        'MASTER_ADDR=${MASTER_ADDR:-$first}',
        "export MASTER_ADDR",
        "unset RANK WORLD_SIZE LOCAL_RANK MASTER_PORT  # ranks come from SLURM_PROCID / SLURM_NTASKS",
        'echo "dl: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, $SLURM_NTASKS task(s), master $MASTER_ADDR"',
        srun,
    ]
    return "\n".join(lines) + "\n"


def task_script(run: Run, python: str) -> str:
    """What each task runs: its rank's command line (`Run.command(rank)`), chosen by `SLURM_PROCID`."""
    cases = [f"  {rank}) set -- {shlex.join(run.command(rank, python))} ;;" for rank in range(run.world_size)]
    return "\n".join([
        "#!/bin/sh",
        f"# one rank of dl run {run.name}; written by dl's slurm scheduler",
        'case "$SLURM_PROCID" in',
        *cases,
        f'  *) echo "dl: SLURM_PROCID=$SLURM_PROCID is outside this run\'s {run.world_size} rank(s)" >&2; exit 2 ;;',
        "esac",
        'echo "dl: rank $SLURM_PROCID of $SLURM_NTASKS on ${SLURMD_NODENAME:-$(hostname)}"',
        'exec "$@"',
    ]) + "\n"
