"""Ctrl-C and SIGTERM as exceptions, raised once, so `dl` and its run processes unwind (DataLoader workers and
child processes are stopped on the way out) instead of dying with work still running, and a second signal
cannot cut that unwinding short and orphan a worker: a terminal's Ctrl-C reaches every process of its group (`dl`
and a worker it forked), and the parent's SIGTERM follows it (how `dl run`'s run processes, each in a session of its
own, learn of a Ctrl-C)."""

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
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if signum in (signal.SIGTERM, signal.SIGHUP):
            os.kill(os.getpid(), signal.SIGTERM)  # ends it, as torch's shutdown expects of a worker it terminates
        # Ctrl-C: the terminal's SIGINT reached the parent too, which stops its workers as it unwinds. Raised here,
        # a KeyboardInterrupt that lands while the child still starts (multiprocessing's bootstrap, before torch's
        # worker loop, which would catch it) ends the worker with a traceback and exit code 1, and the parent's
        # DataLoader then reports a worker that "exited unexpectedly".
        return
    for ignored in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)
    raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def stop_once_on_signals() -> None:
    """From now on, in this process's main thread, the first SIGINT raises KeyboardInterrupt and the first SIGTERM (or
    SIGHUP: the terminal closed, which no longer reaches `dl run`'s run processes, each in a session of its own)
    raises `Terminated`; SIGINT, SIGTERM and SIGHUP are ignored after it while the process unwinds (a parent
    that must not wait for ever follows up with SIGKILL, as `dl`'s local scheduler and SLURM do). A forked child
    that has not set its own handlers (a DataLoader worker) ignores SIGINT, which its parent got too and answers
    by stopping it, and ends on SIGTERM."""
    global _installed_in
    _installed_in = os.getpid()
    for handled in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(handled, _stop_once)
