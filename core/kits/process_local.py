"""Per-process state: `ProcessLocal` holds a value each process makes for itself on first use, for what must not
cross a fork: locks (a forked child keeps only the forking thread, so a lock another thread held at the fork stays
held there forever), download threads, open decoders, HTTP clients. dl registers nothing at fork
(`os.register_at_fork`): a fork by user code or by a DataLoader never waits on dl; the child sees that it is another
process the first time it uses the value, and makes its own.
"""

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ProcessLocal(Generic[T]):
    """The value `make()` returns, made once in each process that asks for it (`get`).

    In a forked child, the value inherited from the parent is kept referenced but never used: its locks may be held
    by threads that do not exist in the child, and its finalizer (closing a client, joining threads) could wait on
    them. Pickles as `make` alone (unpickled, the value is made on first use), so `make` must be picklable where its
    owner is pickled: a class, a module-level function, a `functools.partial` of one.

    Args:
        make: builds this process's value; called under a lock of this process, once per process.
    """

    def __init__(self, make: Callable[[], T]):
        self._make = make
        self._pid: int | None = None
        self._value: T | None = None
        self._inherited: tuple = ()  # the values of the processes this one forked from, never finalized here
        self._guards: dict[int, threading.Lock] = {}  # one per process: `setdefault` hands two threads the same

    def __getstate__(self) -> dict:
        return {"make": self._make}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["make"])

    def get(self) -> T:
        """This process's value, made now if this process has none."""
        pid = os.getpid()
        if self._pid != pid:
            with self._guards.setdefault(pid, threading.Lock()):
                if self._pid != pid:
                    self._inherited, self._value = (*self._inherited, self._value), self._make()
                    self._pid = pid
        return self._value

    def here(self) -> T | None:
        """This process's value if it made one, else None (nothing is made)."""
        return self._value if self._pid == os.getpid() else None
