"""`bucket` on S3 streams ranges through presigned URLs in the calling thread (`dl.plugins.remote.s3_presigned`),
against moto through dl's fault proxy: the bytes asked for, on kept-alive connections, one URL per object; request
options a URL cannot carry fall back to s3fs's `get_object`; a missing object is a missing file; a source still
pickles (each process makes its own connections); processes started after `prepare` (forked or spawned) read through
the URLs it made, and a URL is made again once `REUSE_S` old."""

import multiprocessing
import pickle

import pytest
import s3fs
from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.contracts.errors import SourceFileNotFoundError
from dl.contracts.source import FileSpan
from dl.plugins.remote import s3_presigned
from dl.plugins.remote.bucket import bucket_filesystem, bucket_source
from dl.plugins.remote.s3_presigned import presignable
from dl.testing.fault_proxy import FaultProxy, Faults

RANGES = [(0, 10), (1000, 5000), (70_000, 70_001), (123_456, 200_000), (299_990, 300_000)]


@pytest.fixture
def blob(tmp_path):
    (tmp_path / "videos").mkdir()
    data = bytes((i * 7 + i // 256) % 256 for i in range(300_000))
    (tmp_path / "videos/blob.bin").write_bytes(data)
    return tmp_path, data


def streamed(source, rel: str, start: int, end: int) -> bytes:
    out = []
    source.fetch_into(rel, start, end, out.append)
    return b"".join(out)


def test_ranges_come_through_one_presigned_url_on_kept_alive_connections(s3, blob):  # noqa: F811
    folder, data = blob
    url = upload(s3, folder)
    with FaultProxy(s3.endpoint_url) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url)
        for start, end in RANGES:
            assert streamed(source, "videos/blob.bin", start, end) == data[start:end]
        gets = [line for line in proxy.request_lines if line.startswith("GET ") and "blob.bin" in line]
        assert len(gets) == len(RANGES)
        assert len(set(gets)) == 1 and "X-Amz-Algorithm=AWS4-HMAC-SHA256" in gets[0]  # one SigV4 URL for all
        assert proxy.connections == 1


def test_request_options_a_url_cannot_carry_go_through_get_object(s3, blob):  # noqa: F811
    folder, data = blob
    url = upload(s3, folder)
    assert presignable(bucket_filesystem(url, {**s3.storage_options(), "skip_instance_cache": True})[0])
    assert not presignable(bucket_filesystem(url, {**s3.storage_options(), "requester_pays": True})[0])
    # without a signature version botocore presigns with SigV2, which newer S3 regions refuse
    assert not presignable(s3fs.S3FileSystem(skip_instance_cache=True, **s3.storage_options()))
    with FaultProxy(s3.endpoint_url) as proxy:
        source = bucket_source(url, storage_options={**s3.storage_options(proxy.endpoint_url), "requester_pays": True})
        assert streamed(source, "videos/blob.bin", 1000, 5000) == data[1000:5000]
        gets = [line for line in proxy.request_lines if line.startswith("GET ") and "blob.bin" in line]
    assert gets and not any("Signature=" in line for line in gets)


def test_retries_a_throttled_or_failing_range_and_counts_it(s3, blob):  # noqa: F811
    folder, data = blob
    url = upload(s3, folder)
    faults = Faults(throttle_every=2, unavailable_every=3, reset_every=5, reset_after_bytes=700, per_request=2)
    with FaultProxy(s3.endpoint_url, faults=faults) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url)
        for start, end in RANGES:
            assert streamed(source, "videos/blob.bin", start, end) == data[start:end]
    stats = source.stats()
    assert proxy.injected["429"] and proxy.injected["503"]
    # (a reset injected into a response shorter than reset_after_bytes cuts nothing: not every one is a retry)
    assert stats["retries"] >= proxy.injected["429"] + proxy.injected["503"]
    assert stats["throttled_429"] == proxy.injected["429"]
    assert stats["failures"] == 0


@pytest.mark.parametrize("cut", ["truncate", "reset"])
def test_a_body_cut_short_is_fetched_again_from_where_it_stopped(s3, blob, cut):  # noqa: F811
    # botocore's HTTP session does not check a body against its Content-Length: a short one must not pass for the
    # whole range (the store would call the file changed)
    folder, data = blob
    url = upload(s3, folder)
    faults = Faults(**{f"{cut}_every": 2}, reset_after_bytes=700)  # every other request: a retry goes through
    with FaultProxy(s3.endpoint_url, faults=faults) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url)
        for start, end in [(1000, 5000), (123_456, 200_000), (5000, 9000), (250_000, 260_000)]:
            assert streamed(source, "videos/blob.bin", start, end) == data[start:end]
    assert proxy.injected[cut] >= 2 and source.stats()["retries"] >= 1 and source.stats()["failures"] == 0


def test_a_missing_object_is_a_missing_file_not_retried(s3, blob):  # noqa: F811
    folder, _ = blob
    url = upload(s3, folder)
    source = s3_source(s3, url)
    assert streamed(source, "videos/blob.bin", 0, 10)  # listed and read once
    s3.filesystem().rm(f"{url.removeprefix('s3://')}/videos/blob.bin")
    requests = source.stats()["requests"]
    with pytest.raises(SourceFileNotFoundError, match="videos/blob.bin"):
        streamed(source, "videos/blob.bin", 10, 20)
    assert source.stats()["requests"] == requests + 1


def test_a_source_that_streamed_still_pickles_and_streams_again(s3, blob):  # noqa: F811
    folder, data = blob
    source = s3_source(s3, upload(s3, folder))
    assert streamed(source, "videos/blob.bin", 5, 50) == data[5:50]
    copy = pickle.loads(pickle.dumps(source))
    assert streamed(copy, "videos/blob.bin", 100, 200) == data[100:200]


def _refuse_to_presign(fs, params):
    raise AssertionError(f"presigned {params} again")


def _read_in_child(source, rel: str, start: int, end: int, pipe) -> None:
    from dl.plugins.remote import s3_presigned

    s3_presigned._presign = _refuse_to_presign  # this process must use the URLs it inherited
    try:
        pipe.send(streamed(source, rel, start, end))
    except Exception as exc:  # the parent's assertion says what failed
        pipe.send(repr(exc))


def test_processes_started_after_prepare_read_through_its_presigned_urls(s3, blob, monkeypatch):  # noqa: F811
    # a DataLoader worker, forked or spawned, takes the URLs the loader's process made in prepare: no client of its own
    folder, data = blob
    url = upload(s3, folder)
    with FaultProxy(s3.endpoint_url) as proxy:
        host = s3_source(s3, url, proxy.endpoint_url)
        host.prepare([FileSpan("videos/blob.bin", size=len(data))])
        spawned = pickle.loads(pickle.dumps(host))
        parent, child = multiprocessing.get_context("fork").Pipe()
        forked = multiprocessing.get_context("fork").Process(target=_read_in_child,
                                                              args=(host, "videos/blob.bin", 10, 20_000, child))
        forked.start()
        assert parent.poll(60), "the forked reader sent nothing within 60 s"
        got = parent.recv()
        forked.join(60)
        monkeypatch.setattr(s3_presigned, "_presign", _refuse_to_presign)
        assert got == data[10:20_000]
        assert streamed(spawned, "videos/blob.bin", 1000, 5000) == data[1000:5000]
        gets = [line for line in proxy.request_lines if line.startswith("GET ") and "blob.bin" in line]
    assert len(gets) == 2 and len(set(gets)) == 1  # the host's URL, read by both


def test_a_url_is_made_again_once_reuse_s_old(s3, blob, monkeypatch):  # noqa: F811
    folder, _ = blob
    fs = s3_source(s3, upload(s3, folder)).fs
    made = []

    async def counted(fs, params):
        made.extend(one["Key"] for one in params)
        return [f"https://signed/{one['Key']}?n={len(made)}" for one in params]

    monkeypatch.setattr(s3_presigned, "_presign", counted)
    now = [1000.0]
    ranges = s3_presigned.PresignedRanges(fs, {"tests/a": ("https://inherited/a", 990.0),
                                               "tests/b": ("https://future/b", 1001.0)}, clock=lambda: now[0])
    assert ranges.url("tests/a") == "https://inherited/a" and made == []
    assert ranges.url("tests/b").startswith("https://signed/b")  # made after now: another host's clock, not trusted
    assert ranges.presign(["tests/a", "tests/c"]) == {"tests/a": "https://inherited/a", "tests/c": "https://signed/c?n=2"}
    now[0] = 990.0 + s3_presigned.REUSE_S - 1
    assert ranges.url("tests/a") == "https://inherited/a" and len(made) == 2
    now[0] = 990.0 + s3_presigned.REUSE_S
    assert ranges.url("tests/a") == "https://signed/a?n=3"
    assert set(ranges.urls()) == {"tests/a", "tests/b", "tests/c"}
    now[0] = 1000.0 + s3_presigned.REUSE_S
    assert set(ranges.urls()) == {"tests/a"}  # the others are stale for a process started now


def test_a_selection_that_cannot_be_presigned_up_front_is_presigned_when_read(s3, blob, monkeypatch, caplog):  # noqa: F811
    folder, data = blob
    source = s3_source(s3, upload(s3, folder))
    real = s3_presigned._presign

    async def unreachable(fs, params):
        raise ConnectionError("the bucket's region could not be asked")

    monkeypatch.setattr(s3_presigned, "_presign", unreachable)
    with caplog.at_level("WARNING", logger="dl.plugins.remote.bucket"):
        source.prepare([FileSpan("videos/blob.bin", size=len(data))])
    assert "presigning the selection's files failed" in caplog.text
    monkeypatch.setattr(s3_presigned, "_presign", real)
    assert streamed(source, "videos/blob.bin", 7, 70_007) == data[7:70_007]
