"""A test plugin module: source `counting`, the local filesystem with every listing request logged.

Each outermost listing call (`find`, `ls`, `glob`, `walk`) appends "PID METHOD PATH" to the file named by
the `log` option, from whatever process makes it (DataLoader workers, benchmark runs, ranks), so a test
can count listings per folder across processes."""

import os
import threading

from fsspec.implementations.local import LocalFileSystem

from dl import Source, hookimpl

_depth = threading.local()


class CountingFileSystem(LocalFileSystem):
    cachable = False

    def __init__(self, log: str, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def _logged(method):  # noqa: N805 - a decorator inside the class body
        def wrapper(self, path, *args, **kwargs):
            outer = getattr(_depth, "n", 0) == 0
            if outer:
                with open(self.log, "a") as f:
                    f.write(f"{os.getpid()} {method.__name__} {self._strip_protocol(path)}\n")
            _depth.n = getattr(_depth, "n", 0) + 1
            try:
                return method(self, path, *args, **kwargs)
            finally:
                _depth.n -= 1

        return wrapper

    find = _logged(LocalFileSystem.find)
    ls = _logged(LocalFileSystem.ls)
    glob = _logged(LocalFileSystem.glob)
    walk = _logged(LocalFileSystem.walk)


def counting_source(root: str, log: str) -> Source:
    """The local folder `root`, with listings logged.

    Args:
        log: the file every listing request is appended to.
    """
    return Source(CountingFileSystem(log=log), os.path.abspath(root), "counting")


@hookimpl
def register_sources(register):
    register("counting", counting_source, "local files, every listing logged (tests)")


def listings(log: str) -> list[tuple[int, str, str]]:
    """The logged listings: (pid, method, path)."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [(int(p), m, path) for p, m, path in (line.split(" ", 2) for line in f.read().splitlines())]

