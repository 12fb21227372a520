"""dl-example-zip's own tests: the `zip` source passes dl's source conformance suite (dl.testing)."""

import zipfile
from pathlib import Path

from dl_example_zip import zip_source

from dl.testing.source_suite import SourceSuite


def zip_folder(folder: Path, archive: Path) -> Path:
    """Pack the dataset folder's files (relative paths) into `archive`, stored, as `zip -r0` does."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(folder).as_posix())
    return archive


class TestZipSource(SourceSuite):
    def make_source(self, dataset_dir, workdir):
        return zip_source(str(zip_folder(dataset_dir, workdir / "dataset.zip")))
