"""Source `local`: a dataset root on local disk, through fsspec's local filesystem."""

import os

from dl.errors import DlError
from dl.hookspecs import hookimpl
from dl.source import Source


class LocalSource(Source):
    """A dataset folder on local disk. Symbolic links inside it are followed, folders included (fsspec's
    listing does not descend into a linked folder, so a camera folder that is a link would look empty):
    the root is trusted, wherever its links point."""

    def list_files(self, folder: str) -> dict[str, int]:
        base = self.path(folder)
        out = {}
        for dirpath, _, filenames in os.walk(base, followlinks=True):
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    size = os.stat(full).st_size
                except FileNotFoundError:  # a dangling link: not a file the dataset has
                    continue
                out[os.path.relpath(full, self.root).replace(os.sep, "/")] = size
        return dict(sorted(out.items()))


def local_source(root: str) -> Source:
    """A dataset folder on local disk.

    Args:
        root: the folder holding meta/, data/ and videos/ (`~` is expanded).

    Raises:
        DlError: `root` does not exist or is not a folder.
    """
    import fsspec

    path = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(path):
        raise DlError(f"--root {root}: no such folder. Give the folder that holds meta/, data/ and videos/.")
    return LocalSource(fsspec.filesystem("file"), path, "local")


@hookimpl
def register_sources(register):
    register("local", local_source, "a dataset folder on local disk (fsspec local filesystem)")
