"""No fork while another thread of this process is inside a request.

A DataLoader forks its workers from a process whose prefetch threads may be downloading at that moment. A forked
child keeps only the forking thread, and every lock another thread held at the fork stays held in the child
forever: huggingface_hub closes its HTTP client in a forked child (`os.register_at_fork`), which takes the
connection pool's lock, so a worker forked while a download held that lock hangs before its first sample
(seen: 2 of 10 `hub` runs of `benchmarks/remote_vs_local.py` on one day hung so, a worker waiting on that lock
in `close_session`). Every request of a remote
source runs inside `request_in_flight()`; before a fork, this module waits for the requests in flight to end
(at most `FORK_WAIT_S`; one attempt, not its retries: waits between attempts are outside) and holds new ones
back until the fork is done.

A child also inherits the finalizers of its parent's async filesystems (s3fs and gcsfs close their HTTP session
when an instance is collected, `weakref.finalize(fs, fs.close_session, fs.loop, ...)`). In the child no thread
runs the parent's event loop, so such a finalizer waits a whole second for it (fsspec's `sync` polls once a
second; the close gives up after 0.1 s) whenever garbage collection reaches the inherited instance: seen in every
DataLoader worker of a `bucket` run, which stalled 1 s on its first episode's rows (the collection ran inside
pyarrow's first import of pandas). The child detaches those finalizers: the sessions are the parent's, and the
child's copies of their sockets close when it exits.
"""

import asyncio
import logging
import os
import threading
import time
import weakref
from contextlib import contextmanager

log = logging.getLogger(__name__)

FORK_WAIT_S = 60.0
"""The longest a fork waits for requests in flight (then it goes ahead, with a warning)."""


class _Guard:
    def __init__(self):
        self.cond = threading.Condition(threading.Lock())
        self.active = 0
        self.forking = False


_guard = _Guard()


@contextmanager
def request_in_flight():
    """Marks the block as a request in flight: a fork waits for it to end, and it waits for a fork to end."""
    guard = _guard
    with guard.cond:
        while guard.forking:
            guard.cond.wait()
        guard.active += 1
    try:
        yield
    finally:
        with guard.cond:
            guard.active -= 1
            guard.cond.notify_all()


def requests_in_flight() -> int:
    """How many threads of this process are inside `request_in_flight()` now."""
    with _guard.cond:
        return _guard.active


def _before_fork() -> None:
    guard = _guard
    guard.cond.acquire()  # held through the fork: no request starts or ends inside it
    guard.forking = True
    deadline = time.monotonic() + FORK_WAIT_S
    while guard.active and (left := deadline - time.monotonic()) > 0:
        guard.cond.wait(left)
    if guard.active:
        log.warning("forking with %d request(s) still in flight after %.0f s: the child may hang", guard.active,
                    FORK_WAIT_S)


def _after_fork_in_parent() -> None:
    _guard.forking = False
    _guard.cond.notify_all()
    _guard.cond.release()


def _after_fork_in_child() -> None:
    global _guard
    _guard = _Guard()  # the child has no other thread, hence no request in flight
    forget_inherited_sessions()


def forget_inherited_sessions() -> int:
    """Detach this process's finalizers that would close an async filesystem's session on an event loop (an
    fsspec `close_session(loop, ...)` callback); called in a forked child, where they all belong to the parent.
    Returns how many were detached."""
    inherited = [f for f, info in list(weakref.finalize._registry.items())  # private, but no public listing
                 if getattr(info.func, "__name__", "") == "close_session" and info.args
                 and isinstance(info.args[0], asyncio.AbstractEventLoop)]
    for finalizer in inherited:
        finalizer.detach()
    return len(inherited)


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
