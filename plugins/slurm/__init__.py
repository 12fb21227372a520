"""Scheduler `slurm`: each benchmark run is one `sbatch` job, chained `afterany` so runs never overlap
(`scheduler`); the job script and each rank's task script (`script`); the launcher that hosts a multi-rank
job's rendezvous store on its first node (`launch`); job states read back from `scontrol` (`jobs`)."""

from dl.contracts.hookspecs import hookimpl

from .scheduler import SlurmScheduler


@hookimpl
def register_schedulers(register):
    register("slurm", SlurmScheduler, "one sbatch job per run, chained afterany; multi-node runs with srun")
