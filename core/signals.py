"""SIGTERM as an exception, so `dl` and its run processes unwind like on Ctrl-C (DataLoader workers and
child processes are stopped on the way out) instead of dying with work still running."""

import signal


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM (a BaseException, like
    KeyboardInterrupt, so `except Exception` blocks do not swallow it)."""


def _raise_terminated(signum, frame):
    raise Terminated()


def raise_on_sigterm() -> None:
    """From now on SIGTERM raises `Terminated` in this process's main thread."""
    signal.signal(signal.SIGTERM, _raise_terminated)
