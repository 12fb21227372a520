"""Source `local`: a dataset root on local disk, through fsspec's local filesystem."""

import os

import fsspec

from dl.errors import DlError
from dl.hookspecs import hookimpl
from dl.source import Source


def local_source(root: str) -> Source:
    """A dataset folder on local disk.

    Raises:
        DlError: `root` does not exist or is not a folder.
    """
    path = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(path):
        raise DlError(f"--root {root}: no such folder. Give the folder that holds meta/, data/ and videos/.")
    return Source(fsspec.filesystem("file"), path, "local")


@hookimpl
def register_sources(register):
    register("local", local_source, "a dataset folder on local disk (fsspec local filesystem)")
