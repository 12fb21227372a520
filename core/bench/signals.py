"""Ctrl-C and SIGTERM as exceptions, raised once, so `dl` and its run processes unwind (DataLoader workers and
child processes are stopped on the way out) instead of dying with work still running, and a second signal
cannot cut that unwinding short and orphan a worker: a terminal's Ctrl-C reaches every process of its group,
and the parent's SIGTERM follows it."""

import os
import signal


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (a BaseException, like
    KeyboardInterrupt, so `except Exception` blocks do not swallow it)."""


_installed_in: int | None = None  # the pid that called stop_once_on_signals (forked children inherit the handler)


def _stop_once(signum, frame):
    if os.getpid() != _installed_in:  # a forked child, e.g. a DataLoader worker
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if signum == signal.SIGTERM:
            os.kill(os.getpid(), signal.SIGTERM)  # ends it, as torch's shutdown expects of a worker it terminates
        # Ctrl-C: the terminal's SIGINT reached the parent too, which stops its workers as it unwinds. Raised here,
        # a KeyboardInterrupt that lands while the child still starts (multiprocessing's bootstrap, before torch's
        # worker loop, which would catch it) ends the worker with a traceback and exit code 1, and the parent's
        # DataLoader then reports a worker that "exited unexpectedly".
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def stop_once_on_signals() -> None:
    """From now on, in this process's main thread, the first SIGINT raises KeyboardInterrupt and the first SIGTERM
    raises `Terminated`; SIGINT and SIGTERM are ignored after it while the process unwinds (a parent that must not
    wait for ever follows up with SIGKILL, as `dl`'s local scheduler and SLURM do). A forked child that has not
    set its own handlers (a DataLoader worker) ignores SIGINT, which its parent got too and answers by stopping
    it, and ends on SIGTERM."""
    global _installed_in
    _installed_in = os.getpid()
    signal.signal(signal.SIGINT, _stop_once)
    signal.signal(signal.SIGTERM, _stop_once)
