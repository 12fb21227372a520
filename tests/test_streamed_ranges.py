"""Remote sources read each range's response body in blocks as it arrives (`RemoteStore.stream_range`: s3fs's
aiobotocore body on S3, huggingface_hub's HTTP session on the Hub), and `RemoteStore.fetch_into` hands the blocks
on in order: a response cut midway is asked again from the first byte not handed on, so each byte arrives once.
Real servers on loopback (moto, dl's Hub server) behind the fault proxy, which cuts every distinct request's
response once."""

import random
import shutil
from pathlib import Path

import pytest
from remote_helpers import hub, loopback_hub_source, publish, s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.kits.remote.retry import RemoteReadError
from dl.kits.remote.store import STREAM_BLOCK_BYTES
from dl.testing.fault_proxy import FaultProxy, Faults

CUTS = Faults(truncate_every=1, reset_after_bytes=100_000, per_request=1)
"""Every distinct request (its Range header included) is cut once after 100 KB, more than one 64 KiB block of the
body, by closing the connection: a resumed request asks for another range, so it is cut too; one asked again
unchanged goes through. Every byte before the cut reaches the client's socket, but how much of it a client hands
on differs: httpx (the Hub's client) yields each full block it read before raising, so a cut Hub response always
hands on a block; aiohttp (s3fs's) raises as soon as it sees the close and drops what it holds unread, so a cut S3
response hands on anything from none of its bytes to all of them, by timing."""
BLOB = "videos/blob.bin"
"""A 300 KB file of seeded random bytes beside the dataset's own files."""


@pytest.fixture(scope="module")
def with_blob(small_dataset, tmp_path_factory):
    root = tmp_path_factory.mktemp("streamed") / "dataset"
    shutil.copytree(small_dataset, root)
    Path(root, BLOB).write_bytes(random.Random(0).randbytes(300_000))
    return root


def _source(server: str, s3, hub, root, endpoint: str | None):  # noqa: F811
    if server == "s3":
        return s3_source(s3, upload(s3, root), endpoint, retry_attempts=40, retry_deadline_s=60)
    return loopback_hub_source(hub, publish(hub, root), endpoint, retry_attempts=40, retry_deadline_s=60)


@pytest.mark.parametrize("server", ["s3", "hub"])
def test_a_range_cut_midway_is_resumed_and_each_byte_arrives_once(server, s3, hub, with_blob):  # noqa: F811
    expected = Path(with_blob, BLOB).read_bytes()
    start, end = 100, len(expected) - 50
    target = s3.endpoint_url if server == "s3" else hub.endpoint
    with FaultProxy(target, faults=CUTS) as proxy:
        source = _source(server, s3, hub, with_blob, proxy.endpoint_url)
        blocks = []
        source.fetch_into(BLOB, start, end, blocks.append)
        stats = source.figures()
    assert b"".join(blocks) == expected[start:end]
    if server == "hub":  # a block came before the cut, so the resumed request asked for another range: cut again
        assert stats["retries"] >= 2
    assert stats["retries"] >= 1
    redirects = 1 if server == "hub" else 0  # an LFS file's `resolve` (once: the retries go to its CDN URL)
    assert stats["requests"] == stats["retries"] + 1 + redirects and stats["failures"] == 0
    assert stats["bytes_fetched"] == end - start  # the retries asked only for what had not arrived


@pytest.mark.parametrize("server", ["s3", "hub"])
def test_a_range_past_the_end_of_the_file_fails_naming_it(server, s3, hub, with_blob):  # noqa: F811
    size = Path(with_blob, BLOB).stat().st_size
    source = _source(server, s3, hub, with_blob, None)
    blocks = []
    with pytest.raises(RemoteReadError, match=BLOB):
        source.fetch_into(BLOB, size - 10, size + 10, blocks.append)
    assert b"".join(blocks) == Path(with_blob, BLOB).read_bytes()[size - 10:]  # what exists, then the error


@pytest.mark.parametrize("server", ["s3", "hub"])
def test_ranges_ending_on_a_block_keep_their_connection(server, s3, hub, with_blob):  # noqa: F811
    # a range of whole blocks hands on its last byte before the client has seen its response end; leaving the
    # response there closed the connection (httpx), so every such range paid a new one: through a benchmark's
    # proxy, the server's and the proxy's threads, and on the real Hub a TLS handshake
    expected = Path(with_blob, BLOB).read_bytes()
    target = s3.endpoint_url if server == "s3" else hub.endpoint
    with FaultProxy(target) as proxy:
        source = _source(server, s3, hub, with_blob, proxy.endpoint_url)
        source.fetch_into(BLOB, 0, 10, lambda block: None)  # the connection every range below can reuse
        opened = proxy.connections
        for start in range(0, 4 * STREAM_BLOCK_BYTES, STREAM_BLOCK_BYTES):
            blocks = []
            source.fetch_into(BLOB, start, start + STREAM_BLOCK_BYTES, blocks.append)
            assert b"".join(blocks) == expected[start:start + STREAM_BLOCK_BYTES]
        assert proxy.connections == opened
