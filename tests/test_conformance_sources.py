"""The built-in `local` source passes dl.testing's source conformance suite."""

from dl.plugins.local_source import local_source
from dl.testing.source_suite import SourceSuite


class TestLocalSource(SourceSuite):
    def make_source(self, dataset_dir, workdir):
        return local_source(str(dataset_dir))
