"""Ctrl-C and SIGTERM as exceptions, raised once, so `dl` and its run processes unwind (DataLoader workers and
child processes are stopped on the way out) instead of dying with work still running, and a second signal
(the terminal's Ctrl-C reaches every process of the group, then the parent's SIGTERM follows) cannot cut
that unwinding short and orphan a worker."""

import signal


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (a BaseException, like
    KeyboardInterrupt, so `except Exception` blocks do not swallow it)."""


def _stop_once(exc_type: type[BaseException]):
    def handler(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise exc_type()

    return handler


def stop_once_on_signals() -> None:
    """From now on, in this process's main thread, the first SIGINT raises KeyboardInterrupt and the first SIGTERM
    raises `Terminated`; every SIGINT or SIGTERM after it is ignored while the process unwinds (a parent that
    must not wait for ever follows up with SIGKILL, as `dl`'s local scheduler does)."""
    signal.signal(signal.SIGINT, _stop_once(KeyboardInterrupt))
    signal.signal(signal.SIGTERM, _stop_once(Terminated))


def worker_signals() -> None:
    """In a DataLoader worker (forked workers inherit `stop_once_on_signals`): SIGINT raises KeyboardInterrupt,
    on which torch's worker loop ends, and SIGTERM, which torch's shutdown sends a worker that did not exit,
    ends the process."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
