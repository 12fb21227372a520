"""`bucket` on S3 reads each range with a GET of the object's presigned URL through httpx (`dl.plugins.remote.links`),
against moto through dl's fault proxy: one SigV4 URL per object on kept-alive connections; request options a URL
cannot carry read through s3fs; a missing object is a missing file, asked once; processes started after `prepare`
(forked or spawned) read through the URLs it made, with no S3 client of their own; a URL refused or grown old is
signed again."""

import multiprocessing
import pickle

import pytest
import s3fs
from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.contracts.errors import SourceFileNotFoundError
from dl.contracts.source import FileSpan
from dl.plugins.remote import bucket
from dl.plugins.remote.bucket import bucket_filesystem, bucket_source, presignable
from dl.testing.fault_proxy import FaultProxy

BLOB = "videos/blob.bin"
RANGES = [(0, 10), (1000, 5000), (70_000, 70_001), (123_456, 200_000), (299_990, 300_000)]


@pytest.fixture
def blob(tmp_path):
    (tmp_path / "videos").mkdir()
    data = bytes((i * 7 + i // 256) % 256 for i in range(300_000))
    (tmp_path / BLOB).write_bytes(data)
    return tmp_path, data


def streamed(source, start: int, end: int) -> bytes:
    out = []
    source.fetch_into(BLOB, start, end, out.append)
    return b"".join(out)


def blob_gets(proxy) -> list[str]:
    return [line for line in proxy.request_lines if line.startswith("GET ") and "blob.bin" in line]


def test_ranges_come_through_one_presigned_url_on_kept_alive_connections(s3, blob):  # noqa: F811
    folder, data = blob
    with FaultProxy(s3.endpoint_url) as proxy:
        source = s3_source(s3, upload(s3, folder), proxy.endpoint_url)
        for start, end in RANGES:
            assert streamed(source, start, end) == data[start:end]
        gets = blob_gets(proxy)
        assert len(gets) == len(RANGES) and source.stats()["requests"] == len(RANGES)
        assert len(set(gets)) == 1 and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in gets[0]  # one SigV4 URL for all
        assert proxy.connections == 1


def test_request_options_a_url_cannot_carry_read_through_s3fs(s3, blob):  # noqa: F811
    folder, data = blob
    url = upload(s3, folder)
    assert presignable(bucket_filesystem(url, {**s3.storage_options(), "skip_instance_cache": True})[0])
    assert not presignable(bucket_filesystem(url, {**s3.storage_options(), "requester_pays": True})[0])
    # without a signature version botocore presigns with SigV2, which newer S3 regions refuse
    assert not presignable(s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options()))
    with FaultProxy(s3.endpoint_url) as proxy:
        source = bucket_source(url, storage_options={**s3.storage_options(proxy.endpoint_url), "requester_pays": True})
        assert streamed(source, 1000, 5000) == data[1000:5000]
        assert all("X-Amz-Signature=" not in line for line in blob_gets(proxy))


def test_a_missing_object_is_a_missing_file_asked_once(s3, blob):  # noqa: F811
    folder, data = blob
    url = upload(s3, folder)
    source = s3_source(s3, url)
    assert streamed(source, 0, 100) == data[:100]  # its URL is kept
    s3.filesystem().rm(f"{url.removeprefix('s3://')}/{BLOB}")
    requests = source.stats()["requests"]
    with pytest.raises(SourceFileNotFoundError, match=BLOB):
        streamed(source, 10, 20)
    # the kept URL's 404 may be a stale signature: signed again once, then a missing file, not retried
    assert source.stats()["requests"] == requests + 2 and source.stats()["retries"] == 0


def test_a_source_that_streamed_still_pickles_and_streams_again(s3, blob):  # noqa: F811
    folder, data = blob
    source = s3_source(s3, upload(s3, folder))
    assert streamed(source, 5, 50) == data[5:50]
    copy = pickle.loads(pickle.dumps(source))
    assert streamed(copy, 100, 200) == data[100:200]


def _refuse_to_presign(fs, paths):
    raise AssertionError(f"presigned {paths} again")


def _read_in_child(source, start: int, end: int, pipe) -> None:
    from dl.plugins.remote import bucket

    bucket._presign = _refuse_to_presign  # this process must use the URLs it inherited
    try:
        pipe.send(streamed(source, start, end))
    except Exception as exc:  # the parent's assertion says what failed
        pipe.send(repr(exc))


def test_processes_started_after_prepare_read_through_its_presigned_urls(s3, blob, monkeypatch):  # noqa: F811
    # a DataLoader worker, forked or spawned, takes the URLs the loader's process made in prepare: no client of its own
    folder, data = blob
    with FaultProxy(s3.endpoint_url) as proxy:
        host = s3_source(s3, upload(s3, folder), proxy.endpoint_url)
        host.prepare([FileSpan(BLOB, size=len(data))])  # not an MP4: read whole, and signed all the same
        assert blob_gets(proxy) == []
        spawned = pickle.loads(pickle.dumps(host))
        parent, child = multiprocessing.get_context("fork").Pipe()
        forked = multiprocessing.get_context("fork").Process(target=_read_in_child, args=(host, 10, 20_000, child))
        forked.start()
        assert parent.poll(60), "the forked reader sent nothing within 60 s"
        got = parent.recv()
        forked.join(60)
        monkeypatch.setattr(bucket, "_presign", _refuse_to_presign)
        assert got == data[10:20_000]
        assert streamed(spawned, 1000, 5000) == data[1000:5000]
        gets = blob_gets(proxy)
    assert len(gets) == 2 and len(set(gets)) == 1  # the host's URL, read by both


def test_a_url_refused_or_grown_old_is_signed_again(s3, blob, monkeypatch):  # noqa: F811
    folder, data = blob
    with FaultProxy(s3.endpoint_url) as proxy:
        source = s3_source(s3, upload(s3, folder), proxy.endpoint_url)
        assert streamed(source, 0, 10) == data[:10]
        (first, made), = source._links.urls.values()
        # refused: a URL whose signature no longer serves (here: it names another object, 404)
        source._links.keep({path: first.replace("blob.bin", "gone.bin") for path in source._links.urls}, made)
        assert streamed(source, 10, 20) == data[10:20]
        assert source.stats()["requests"] == 3 and source.stats()["retries"] == 0
        # grown old: a URL kept longer than its reuse is signed again before it is sent
        source._links.keep({path: first.replace("blob.bin", "gone.bin") for path in source._links.urls},
                           made - bucket.EXPIRES_S)
        assert streamed(source, 20, 30) == data[20:30]
        assert source.stats()["requests"] == 4
        lines = list(proxy.request_lines)
    assert sum("gone.bin" in line for line in lines) == 1  # only the refused one was sent
