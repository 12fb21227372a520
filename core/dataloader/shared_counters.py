"""int64 counters in shared memory, one row per process slot, so figures counted inside DataLoader workers
can be read in the main process (the benchmark reads decoder-cache and pool counters this way)."""

import torch
import torch.utils.data

MAX_SLOTS = 257  # slot 0: the main process; slot 1 + worker id: DataLoader workers


class SharedCounters:
    """Named int64 counters per process slot, created in the main process before workers start.

    Args:
        names: the counter names.

    Each process writes only its own slot (the main process slot 0, DataLoader worker `i` slot 1 + i), so
    no locking is needed; `total()` sums the slots. Counting goes through a numpy view of the shared tensor, far
    cheaper per `add` than torch indexing (the pool and the decoder cache count several times per sample).
    """

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self._col = {n: i for i, n in enumerate(names)}
        self.values = torch.zeros((MAX_SLOTS, len(names)), dtype=torch.int64).share_memory_()
        self._cells = self.values.numpy()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_cells"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cells = self.values.numpy()

    def add(self, name: str, n: int = 1) -> None:
        """Add `n` to this process's counter."""
        self._cells[_slot(), self._col[name]] += n

    def set(self, name: str, value: int) -> None:
        """Set this process's counter."""
        self._cells[_slot(), self._col[name]] = value

    def set_max(self, name: str, value: int) -> None:
        """Raise this process's counter to `value` if it is lower (a peak)."""
        row, col = _slot(), self._col[name]
        if value > self._cells[row, col]:
            self._cells[row, col] = value

    def total(self) -> dict[str, int]:
        """Every counter summed over all process slots."""
        return dict(zip(self.names, self.values.sum(0).tolist(), strict=True))

    def reset(self, names: tuple[str, ...] | None = None) -> None:
        """Zero some counters (default: all) in every slot."""
        for name in names or self.names:
            self.values[:, self._col[name]] = 0


def _slot() -> int:
    info = torch.utils.data.get_worker_info()
    return 0 if info is None else 1 + info.id % (MAX_SLOTS - 1)
