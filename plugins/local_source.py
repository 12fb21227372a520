"""Source `local`: a dataset root on local disk, through fsspec's local filesystem."""

import os

from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.contracts.source import Source


def local_source(root: str) -> Source:
    """A dataset folder on local disk (symbolic links inside it are followed, folders included).

    Args:
        root: the folder holding meta/, data/ and videos/ (`~` is expanded).

    Raises:
        DlError: `root` does not exist or is not a folder.
    """
    import fsspec

    path = os.path.abspath(os.path.expanduser(root))
    if os.path.exists(path) and not os.path.isdir(path):
        raise DlError(f"{root} is a file, not a dataset folder. Give the folder that holds meta/, data/ and "
                      "videos/ (e.g. the parent of meta/info.json).")
    if not os.path.isdir(path):
        raise DlError(f"dataset {root}: no such folder. Give the folder that holds meta/, data/ and videos/.")
    return Source(fsspec.filesystem("file"), path, "local")


@hookimpl
def register_sources(register):
    register("local", local_source, "a dataset folder on local disk (fsspec local filesystem)")
