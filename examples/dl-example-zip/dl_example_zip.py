"""dl plugin: source `zip`, a LeRobot v3.0 dataset packed in a .zip archive, read in place through
fsspec's ZipFileSystem (nothing is extracted)."""

import os
import posixpath
import zipfile

import fsspec

from dl import DlError, Source, hookimpl


class ZipSource(Source):
    """A dataset root inside a zip archive.

    Args:
        archive: absolute path of the .zip file.
        inner: the dataset root inside the archive: "" (the archive's top level) or a folder.
    """

    def __init__(self, archive: str, inner: str):
        self.archive = archive
        super().__init__(fsspec.filesystem("zip", fo=archive), inner, "zip")

    @property
    def url(self) -> str:
        """`zip:///path/to/x.zip!/inner`. The inherited url (`zip://inner`) leaves out the archive, and dl
        keys its decoder and tabular caches on the url, so two archives would share entries.

        Inherited as they are: `fs` (rebuilt once per forked process, so DataLoader workers never share the
        archive's file offset) and `fingerprint` (built from the member's size and CRC-32, which zip records
        for every member; not fsspec's `ukey`, which also hashes the archive's file object and so differs
        between instances)."""
        return f"zip://{self.archive}!" + (f"/{self.root}" if self.root else "")

    # video_input() is inherited: on this non-local filesystem it returns self.open(rel), a seekable
    # zipfile.ZipExtFile, and torchcodec 0.13's VideoDecoder accepts such file objects (it reads through
    # read()/seek(); checked with deflated and stored members). A backward seek in a deflated member
    # re-inflates it from its start: cheap for LeRobot's small mp4 files, free with `zip -0` archives.


def zip_source(root: str, inner: str | None = None) -> ZipSource:
    """A LeRobot v3.0 dataset in the .zip archive `root`, read in place.

    Args:
        root: the .zip file.
        inner: the folder inside the archive that holds meta/info.json (default: the only such folder,
            or the archive's top level); needed when the archive holds several datasets.

    Raises:
        DlError: the archive does not exist or is not a zip file, or holds no dataset, or several.
    """
    archive = os.path.abspath(os.path.expanduser(root))
    if not os.path.isfile(archive) or not zipfile.is_zipfile(archive):
        what = "not a zip archive" if os.path.isfile(archive) else "no such file"
        raise DlError(f"--root {root}: {what}. Give a .zip of a LeRobot v3.0 dataset folder, e.g. made with "
                      "`cd DATASET && zip -r0 ../DATASET.zip meta data videos`.")
    fs = fsspec.filesystem("zip", fo=archive)
    if inner is not None:
        inner = str(inner).strip("/")  # --source-option values arrive JSON-parsed: inner=2024 is an int
        roots = [inner] if fs.exists(posixpath.join(inner, "meta/info.json")) else []
    else:
        roots = sorted(posixpath.dirname(posixpath.dirname(p)) for p in fs.glob("**/meta/info.json"))
    if not roots:
        where = f"{inner}/meta/info.json" if inner is not None else "meta/info.json in any folder"
        raise DlError(f"{archive} holds no {where}: zip the dataset folder (the one holding meta/, data/ "
                      "and videos/), or name the folder inside the archive with --source-option inner=DIR.")
    if len(roots) > 1:
        raise DlError(f"{archive} holds {len(roots)} datasets ({', '.join(r or '<top level>' for r in roots)}); "
                      "pick one with --source-option inner=DIR.")
    return ZipSource(archive, roots[0])


@hookimpl
def register_sources(register):
    register("zip", zip_source, "a LeRobot v3.0 dataset packed in a .zip archive (fsspec zip filesystem)")
