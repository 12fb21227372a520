"""Loopback servers and sources for the remote-source tests: moto's S3 server, dl's Hub API server and the
fault proxy from dl.testing, one of each per test module."""

import itertools

import pytest

from dl.plugins.remote.bucket import bucket_source
from dl.plugins.remote.hub import hub_source
from dl.testing.hub_server import HubServer
from dl.testing.s3_server import S3Server

_names = itertools.count()


@pytest.fixture(scope="module")
def s3():
    with S3Server() as server:
        yield server


@pytest.fixture(scope="module")
def hub():
    with HubServer(page_size=7) as server:  # small pages: listings paginate
        yield server


def upload(s3: S3Server, folder) -> str:
    """`folder` under a fresh prefix of the test bucket; its URL."""
    return s3.upload(folder, "tests", f"ds{next(_names)}")


def publish(hub: HubServer, folder, **kwargs) -> str:
    """`folder` as the main branch of a fresh dataset repo; the repo id."""
    repo = f"tests/ds{next(_names)}"
    hub.add_revision(repo, folder, **kwargs)
    return repo


def s3_source(s3: S3Server, url: str, endpoint_url: str | None = None, **options):
    return bucket_source(url, storage_options=s3.storage_options(endpoint_url), **options)


def loopback_hub_source(hub: HubServer, repo: str, endpoint: str | None = None, **options):
    return hub_source(repo, storage_options={"endpoint": endpoint or hub.endpoint}, **options)
