"""A real SLURM cluster on localhost for the tests: Debian 12's `munge`, `slurmctld` and `slurmd` (22.05),
started directly (there is no systemd) with every file under one temporary folder, and stopped by pid.

Two nodes on one machine are two `slurmd -N nodeI` processes, each with its own port, spool, pid and log
file. Cgroups are avoided (`proctrack/linuxproc`, `task/none`, `jobacct_gather/none`); there is no
accounting daemon, so finished jobs are read from `squeue -t all` / `scontrol show job` (kept for
`MinJobAge` seconds). `EnforcePartLimits=ALL` makes an impossible request fail at submission instead of
pending forever. Ports are picked free at start and written into `slurm.conf`; clients find the cluster
through `SLURM_CONF`.
"""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "srun")
NODE_CPUS, NODE_MEMORY_MB = 2, 2048
START_TIMEOUT_S = 60


def missing_binaries() -> list[str]:
    """The SLURM/munge programs not on PATH (or in /usr/sbin)."""
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    return [name for name in DAEMONS if shutil.which(name, path=path) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sbin(name: str) -> str:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


class LocalSlurmCluster:
    """`nodes` SLURM nodes (`node1`...) on this machine, partition `debug`, each with NODE_CPUS CPUs and
    NODE_MEMORY_MB MB. `start()` then `env` (for client commands) ... `stop()`.

    Must run as root (slurmd runs jobs as their submitting user, slurmctld and slurmd as root here)."""

    def __init__(self, nodes: int = 2, cred_expire_s: int = 5):
        self.nodes = [f"node{i + 1}" for i in range(nodes)]
        self.cred_expire_s = cred_expire_s
        # not under pytest's tmp folders: those are private to root, and munged runs as the munge user
        self.dir = Path(tempfile.mkdtemp(prefix="dl-slurm-"))
        self.dir.chmod(0o755)
        self.conf = self.dir / "slurm.conf"
        self.procs: dict[str, int] = {}  # daemon -> pid

    @property
    def env(self) -> dict:
        """The environment of a client command (sbatch, squeue...) talking to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------------------------------------ start
    def start(self) -> "LocalSlurmCluster":
        try:
            self._start_munge()
            self._write_conf()
            self._start_slurm()
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        folder = self.dir / "munge"
        folder.mkdir()
        folder.chmod(0o711)  # munged: the socket folder must be searchable by every user
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        for path in (folder, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        self.munge_socket = folder / "munge.socket.2"
        pid_file = folder / "munged.pid"
        subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged"), f"--socket={self.munge_socket}",
                        f"--key-file={key}", f"--pid-file={pid_file}", f"--log-file={folder / 'munged.log'}",
                        f"--seed-file={folder / 'munged.seed'}"], check=True, capture_output=True, timeout=30)
        self.procs["munged"] = self._read_pid(pid_file)

    def _write_conf(self) -> None:
        (self.dir / "state").mkdir()
        node_lines = "\n".join(
            f"NodeName={name} NodeAddr=127.0.0.1 NodeHostname=localhost Port={_free_port()} CPUs={NODE_CPUS} "
            f"RealMemory={NODE_MEMORY_MB} State=UNKNOWN" for name in self.nodes)
        d = self.dir
        self.conf.write_text(f"""\
ClusterName=dltest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket},cred_expire={self.cred_expire_s}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SlurmdParameters=config_overrides
EnforcePartLimits=ALL
ReturnToService=2
MpiDefault=none
MinJobAge=900
DefMemPerCPU=256
KillWait=5
InactiveLimit=0
SchedulerParameters=sched_interval=2
{node_lines}
PartitionName=debug Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP
""")

    def _start_slurm(self) -> None:
        env = self.env
        subprocess.run([_sbin("slurmctld")], env=env, check=True, capture_output=True, timeout=30)
        self.procs["slurmctld"] = self._read_pid(self.dir / "slurmctld.pid")
        for name in self.nodes:
            subprocess.run([_sbin("slurmd"), "-N", name], env=env, check=True, capture_output=True, timeout=30)
            self.procs[f"slurmd {name}"] = self._read_pid(self.dir / f"slurmd-{name}.pid")

    def _read_pid(self, path: Path) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                return int(path.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                time.sleep(0.1)
        raise RuntimeError(f"no pid file {path} after {START_TIMEOUT_S} s; logs:\n{self.logs()}")

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        states = ""
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True,
                                 timeout=30)
            states = out.stdout + out.stderr
            if out.returncode == 0 and all(f"{name} idle" in out.stdout for name in self.nodes):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the nodes did not come up idle within {START_TIMEOUT_S} s: {states}\n{self.logs()}")

    # ------------------------------------------------------------------------------------------ stop
    def stop(self) -> None:
        """SIGTERM each daemon this cluster started (by pid, slurmd first), then SIGKILL any left; remove
        the folder."""
        order = [k for k in self.procs if k.startswith("slurmd")] + ["slurmctld", "munged"]
        for name in order:
            pid = self.procs.get(name)
            if pid:
                _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name in order:
            pid = self.procs.get(name)
            while pid and _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pid and _alive(pid):
                _signal(pid, signal.SIGKILL)
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self, tail: int = 40) -> str:
        """The last lines of every daemon log (for failure messages)."""
        out = []
        for path in sorted(self.dir.rglob("*.log")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            out.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(out)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of ours would count as alive; these daemons are not our children (they fork)
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
