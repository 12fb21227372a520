"""Who is reading: the rank and world size of a distributed job and the DataLoader worker, resolved in one
place. Every (rank x worker) pair is one consumer of the data."""

import os
import sys
from dataclasses import dataclass

from ..contracts.errors import DlError


@dataclass(frozen=True)
class World:
    """A consumer's place: `rank` of `world_size` processes, DataLoader `worker` of `num_workers` (a loader
    iterated in the main process is worker 0 of 1)."""

    rank: int
    world_size: int
    worker: int = 0
    num_workers: int = 1

    @property
    def consumer(self) -> int:
        """This consumer's id in [0, num_consumers): rank-major, so a rank's workers are adjacent."""
        return self.rank * self.num_workers + self.worker

    @property
    def num_consumers(self) -> int:
        """world_size x num_workers."""
        return self.world_size * self.num_workers


@dataclass(frozen=True)
class Ranks:
    """This process's place in a distributed job, and where that was read from.

    Attributes:
        rank, world_size: global rank in [0, world_size).
        local_rank: rank among the processes of this node.
        source: "arguments", "torch.distributed", "accelerate", "env" (RANK / WORLD_SIZE, as torchrun
            sets), "slurm" (SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID) or "default" (one process).
    """

    rank: int
    world_size: int
    local_rank: int
    source: str


def resolve_ranks(rank: int | None = None, world_size: int | None = None) -> Ranks:
    """This process's rank and world size, from the first of: the arguments; an initialized
    torch.distributed process group; accelerate's state (when the trainer initialized it); the `RANK` /
    `WORLD_SIZE` / `LOCAL_RANK` environment (torchrun, accelerate launch, dl's local scheduler); SLURM's
    `SLURM_PROCID` / `SLURM_NTASKS` / `SLURM_LOCALID` (a task of `srun`); else rank 0 of 1.

    Raises:
        DlError: only one of rank / world_size given, a non-integer environment value, or rank outside
            [0, world_size).
    """
    if (rank is None) != (world_size is None):
        raise DlError("give both rank and world_size, or neither (they are then read from torch.distributed, "
                      "accelerate, RANK / WORLD_SIZE or SLURM_PROCID / SLURM_NTASKS).")
    found = Ranks(rank, world_size, _env_int("LOCAL_RANK", rank), "arguments") if rank is not None else _detected()
    if not 0 <= found.rank < found.world_size:
        raise DlError(f"rank {found.rank} is outside [0, world_size={found.world_size}) (from {found.source}).")
    return found


def _detected() -> Ranks:
    if "torch" in sys.modules:
        import torch.distributed

        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank = torch.distributed.get_rank()
            return Ranks(rank, torch.distributed.get_world_size(), _env_int("LOCAL_RANK", rank), "torch.distributed")
    if "accelerate" in sys.modules:
        from accelerate.state import PartialState

        if PartialState._shared_state:  # initialized by the trainer; never initialize it from here
            state = PartialState()
            return Ranks(state.process_index, state.num_processes, state.local_process_index, "accelerate")
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank = _env_int("RANK", 0)
        return Ranks(rank, _env_int("WORLD_SIZE", 1), _env_int("LOCAL_RANK", rank), "env")
    if "SLURM_PROCID" in os.environ and "SLURM_NTASKS" in os.environ:
        rank = _env_int("SLURM_PROCID", 0)
        return Ranks(rank, _env_int("SLURM_NTASKS", 1), _env_int("SLURM_LOCALID", rank), "slurm")
    return Ranks(0, 1, 0, "default")


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise DlError(f"environment variable {name}={value!r} is not an integer.") from None


def current_world(rank: int, world_size: int) -> World:
    """The World of the calling process: `rank`/`world_size` plus the DataLoader worker it runs in."""
    import torch.utils.data

    info = torch.utils.data.get_worker_info()
    if info is None:
        return World(rank, world_size)
    return World(rank, world_size, info.id, info.num_workers)


def process_cores() -> int:
    """CPU cores this process may count on for itself (>= 1): the cores it may run on, shared by the DataLoader
    workers of its loader (in a worker: `num_workers` processes) and by the ranks on this node
    (`LOCAL_WORLD_SIZE`, as torchrun and accelerate set it). Decoders use it to decide whether decoding a
    sample's cameras in threads can run on idle cores."""
    import torch.utils.data

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    info = torch.utils.data.get_worker_info()
    sharers = (info.num_workers if info is not None else 1) * max(_env_int("LOCAL_WORLD_SIZE", 1) or 1, 1)
    return max(1, cores // sharers)


WORKERS_PER_CORE = 4
"""The most DataLoader workers per usable core `check_worker_count` allows (I/O-bound remote reads gain from a
few more workers than cores; past that they only compete for the cores)."""
WORKER_BYTES = 512 << 20
"""Memory a DataLoader worker is counted to need: torch, its decoders and its batches in flight (a map-loader
worker on 640x480 video measures 300-500 MB of RSS)."""


def max_workers() -> tuple[int, str]:
    """The most DataLoader workers this process's share of the machine can run, and why: `WORKERS_PER_CORE`
    per usable core (`process_cores`, the ranks on this node counted), at most one per `WORKER_BYTES` of
    available memory, at least one. `DL_MAX_WORKERS` overrides it."""
    import psutil

    override = _env_int("DL_MAX_WORKERS", None)
    if override is not None:
        return override, f"DL_MAX_WORKERS={override}"
    cores = process_cores()
    available = psutil.virtual_memory().available
    limit = max(1, min(WORKERS_PER_CORE * cores, available // WORKER_BYTES))
    return limit, (f"{WORKERS_PER_CORE} per core with {cores} usable core(s), and {WORKER_BYTES >> 20} MB each of "
                   f"{available / 2**30:.1f} GiB available")


def check_worker_count(num_workers: int) -> None:
    """Refuse a DataLoader worker count this machine cannot run (`max_workers`): each worker is a process
    with its own torch, decoders and batches, so too many exhaust memory before the first batch.

    Raises:
        DlError: more than `max_workers()`, naming the limit, why, and the override.
    """
    limit, why = max_workers()
    if num_workers > limit:
        raise DlError(f"num_workers={num_workers}: this machine can run at most {limit} DataLoader workers ({why}); "
                      f"more compete for the cores and can exhaust memory before the first batch. Use fewer, or "
                      f"set DL_MAX_WORKERS={num_workers} to allow it.")
