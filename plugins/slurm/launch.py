"""`python -m dl.plugins.slurm.launch COMMAND...`: what the job script of a multi-rank run executes on the job's
first node (where SLURM runs batch scripts, the node `MASTER_ADDR` names). It hosts the ranks' rendezvous
store on a port the system picks and holds for the job (`dl.dataloader.rendezvous`: two jobs on one node
never meet at one port, as `20000 + jobid % 20000` could make them), runs COMMAND (`srun ...`) with
`MASTER_PORT` and `TORCHELASTIC_USE_AGENT_STORE` added to its environment, passes on the signals SLURM sends
the batch step (SIGTERM from `scancel`, SIGUSR1/SIGUSR2 warnings, SIGINT), and exits with COMMAND's status
(128 + N when a signal N ended it)."""

import os
import signal
import socket
import subprocess
import sys

from dl.dataloader.rendezvous import hosted_store

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m dl.plugins.slurm.launch COMMAND...", file=sys.stderr)
        return 2
    address = os.environ.get("MASTER_ADDR") or socket.gethostname()
    with hosted_store(address) as rendezvous:
        print(f"dl: rendezvous store at {address}:{rendezvous['MASTER_PORT']}", flush=True)
        child = subprocess.Popen(argv, env={**os.environ, **rendezvous})
        for number in FORWARDED:
            signal.signal(number, lambda received, _frame: child.send_signal(received))
        code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
