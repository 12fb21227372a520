"""The built-in remote sources pass dl.testing's source conformance suite against real protocol servers on
loopback: `bucket` against moto's S3 server (with and without the prefetch cache), `hub` against dl's Hub
API server (paginated listings)."""

import pytest
from remote_helpers import hub, loopback_hub_source, publish, s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.testing.source_suite import SourceSuite


class TestBucketSource(SourceSuite):
    @pytest.fixture(autouse=True)
    def _server(self, s3):  # noqa: F811
        self.s3 = s3

    def make_source(self, dataset_dir, workdir):
        return s3_source(self.s3, upload(self.s3, dataset_dir))


class TestBucketSourceStreaming(TestBucketSource):
    """Without the prefetch cache: every read is a ranged request through a small read-ahead buffer."""

    def make_source(self, dataset_dir, workdir):
        return s3_source(self.s3, upload(self.s3, dataset_dir), prefetch=False, block_size=4096)


class TestHubSource(SourceSuite):
    @pytest.fixture(autouse=True)
    def _server(self, hub):  # noqa: F811
        self.hub = hub

    def make_source(self, dataset_dir, workdir):
        return loopback_hub_source(self.hub, publish(self.hub, dataset_dir))


class TestBucketSourceFileUrl(SourceSuite):
    """`bucket` takes any fsspec URL: here file://."""

    def make_source(self, dataset_dir, workdir):
        from dl.plugins.remote.bucket import bucket_source

        return bucket_source(f"file://{dataset_dir}")
