"""Who is reading: the rank and world size of a distributed job and the DataLoader worker, in one place.
Every (rank x worker) pair is one consumer of the data."""

import os
import sys
from dataclasses import dataclass

import torch.distributed
import torch.utils.data

from .errors import DlError


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


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world_size) from the arguments, else an initialized torch.distributed process group, else
    accelerate's state (when accelerate is in use), else the `RANK` / `WORLD_SIZE` environment variables
    (torchrun, SLURM launchers), else (0, 1).

    Raises:
        DlError: only one of rank / world_size given, or rank outside [0, world_size).
    """
    if (rank is None) != (world_size is None):
        raise DlError("give both rank and world_size, or neither (they are then read from torch.distributed, "
                      "accelerate or the RANK / WORLD_SIZE environment variables).")
    if rank is None:
        rank, world_size = _detected()
    if not 0 <= rank < world_size:
        raise DlError(f"rank {rank} is outside [0, world_size={world_size}).")
    return rank, world_size


def _detected() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    if "accelerate" in sys.modules:
        from accelerate.state import PartialState

        if PartialState._shared_state:  # initialized by the trainer; never initialize it from here
            state = PartialState()
            return state.process_index, state.num_processes
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return 0, 1


def current_world(rank: int, world_size: int) -> World:
    """The World of the calling process: `rank`/`world_size` plus the DataLoader worker it runs in."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return World(rank, world_size)
    return World(rank, world_size, info.id, info.num_workers)
