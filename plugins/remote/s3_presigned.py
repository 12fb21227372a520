"""Ranged GETs of S3 objects through presigned URLs, sent in the calling thread by botocore's own synchronous
HTTP session.

s3fs's `get_object` (aiobotocore) runs each request on fsspec's event-loop thread: the download thread hands the
request and every block of its body across threads, and botocore builds, signs and parses each request in full.
A presigned URL of an object serves every range of it (SigV4 signs the host, not the `Range` header), so one URL
is made per object (through the filesystem's own client, its credentials and endpoint) and reused for
`REUSE_S` seconds, and each range is one GET on a kept-alive connection of `botocore.httpsession.URLLib3Session`
(proxies from the environment, as botocore takes them; certificates checked as the filesystem's `verify` says).
Measured through dl's fault proxy (20 ms, 80 Mbit/s) against moto, 4 threads fetching 40 MB in 96 KiB ranges: the
client's CPU 0.47 s against 1.17 s through `get_object`.

The URLs a process made go to the processes it starts (`urls`, and `PresignedRanges(fs, urls)`): a DataLoader worker
forked or spawned after the loader's process presigned the selection's files (`presign`) reads them without making
a client of its own. Building s3fs's aiobotocore client in a forked worker for its first URL cost 0.12 s of CPU and
30 MB of the worker's own memory (USS) here, against 0.01 s and 6 MB with the URL inherited, and held back the
worker's first downloads on open50 by 0.1 s (`first_admission_s` 0.19-0.28 s before, 0.11 s after).
"""

import os
import threading
import time
from collections.abc import Iterator

from dl.kits.remote.store import STREAM_BLOCK_BYTES

EXPIRES_S = 3600
"""A presigned URL's lifetime (seconds)."""
REUSE_S = 300
"""How long a presigned URL is used before a new one is made (wall-clock seconds, which its signature's date is
checked against, on any process or host): well inside `EXPIRES_S`, and inside the 10 minutes of validity botocore
keeps on refreshable (temporary) credentials, so a URL never outlives what signed it."""
TIMEOUT_S = 60.0
"""Seconds a connection or a read may stall before the request fails (a transient error: retried)."""
POOL_CONNECTIONS = 16
"""Connections kept alive per process (at least the prefetch threads plus a reader's own)."""


class BodyCutShort(ConnectionError):
    """A response body ended before its `Content-Length` (the connection was cut): transient, retried from the
    first byte not handed on (botocore's HTTP session leaves this check to its callers)."""


class S3StatusError(OSError):
    """An S3 error response to a ranged GET. `response` carries `status_code` and `headers` (`Retry-After`), as
    `dl.kits.remote.retry.classify` reads them: 408, 429 and 5xx are retried, other statuses are not."""

    def __init__(self, url: str, response):
        self.response = response
        super().__init__(f"HTTP {response.status_code} for {url.split('?')[0]}")


def presignable(fs) -> bool:
    """Whether ranges of `fs`'s objects can be read through presigned URLs: an s3fs filesystem whose client names
    its signature version (`config_kwargs`, as `dl.plugins.remote.bucket.bucket_filesystem` sets SigV4: without
    one, botocore presigns S3 URLs with SigV2, which S3 regions opened since 2014 refuse) or is anonymous, and
    without request options a URL cannot carry (requester pays, server-side encryption with customer keys:
    `req_kw`, `s3_additional_kwargs`)."""
    signed = getattr(fs, "anon", False) or (getattr(fs, "config_kwargs", None) or {}).get("signature_version")
    return (type(fs).__name__ == "S3FileSystem" and hasattr(fs, "_call_s3") and bool(signed)
            and not getattr(fs, "req_kw", None) and not getattr(fs, "s3_additional_kwargs", None))


async def _presign(fs, params: list[dict]) -> list[str]:
    """Presigned GET URLs through `fs`'s client for each of `params` (`Bucket`, `Key`, maybe `VersionId`), each
    with its bucket's client (its region's, with s3fs's `cache_regions`)."""
    await fs.set_session()
    urls = []
    for one in params:
        client = await fs.get_s3(one["Bucket"])
        urls.append(await client.generate_presigned_url("get_object", Params=one, ExpiresIn=EXPIRES_S))
    return urls


class PresignedRanges:
    """Ranged GETs of one s3fs filesystem's objects (one instance per process: its connections are its own).

    Args:
        fs: the s3fs filesystem (`presignable`).
        urls: URLs another process made (its `urls()`), used as long as they are fresh (`REUSE_S`).
        clock: wall-clock seconds (`time.time`; tests give their own).
    """

    def __init__(self, fs, urls: dict[str, tuple[str, float]] | None = None, clock=time.time):
        from botocore.httpsession import URLLib3Session
        from botocore.utils import get_environ_proxies

        self.fs, self.clock = fs, clock
        self.pid = os.getpid()
        client = fs.client_kwargs or {}
        endpoint = client.get("endpoint_url") or getattr(fs, "endpoint_url", None) or "https://s3.amazonaws.com"
        verify = client.get("verify")
        if verify is None:
            verify = os.environ.get("AWS_CA_BUNDLE") or True
        self.session = URLLib3Session(verify=verify, proxies=get_environ_proxies(endpoint), timeout=TIMEOUT_S,
                                      max_pool_connections=POOL_CONNECTIONS)
        self._urls: dict[str, tuple[str, float]] = dict(urls or {})  # path: (URL, when it was made)
        self._lock = threading.Lock()

    def url(self, path: str) -> str:
        """A presigned GET URL of `path` (`bucket/key`, with a version when the path names one)."""
        with self._lock:
            found = self._urls.get(path)
        if found is not None and self._fresh(found):
            return found[0]
        return self.presign([path])[path]

    def presign(self, paths: list[str]) -> dict[str, str]:
        """Fresh presigned GET URLs of `paths` (those not held fresh made in one call on the filesystem's loop);
        `{path: URL}`."""
        with self._lock:
            held = {p: self._urls[p][0] for p in paths if p in self._urls and self._fresh(self._urls[p])}
        todo = sorted({p for p in paths if p not in held})
        if todo:
            from fsspec.asyn import sync

            params = []
            for path in todo:
                bucket, key, version = self.fs.split_path(path)
                params.append({"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {})})
            now = self.clock()  # when they are signed (their validity starts then)
            made = sync(self.fs.loop, _presign, self.fs, params)
            with self._lock:
                self._urls.update((p, (u, now)) for p, u in zip(todo, made, strict=True))
            held.update(zip(todo, made, strict=True))
        return held

    def urls(self) -> dict[str, tuple[str, float]]:
        """The fresh URLs made or taken so far (`{path: (URL, when it was made)}`), for a process this one starts.
        In a process forked from this instance's, read without its lock, which a thread may have held at the fork
        (the dict itself is whole)."""
        if self.pid != os.getpid():
            found = dict(self._urls)
        else:
            with self._lock:
                found = dict(self._urls)
        return {p: one for p, one in found.items() if self._fresh(one)}

    def _fresh(self, found: tuple[str, float]) -> bool:
        return 0 <= self.clock() - found[1] < REUSE_S

    def stream(self, path: str, start: int, end: int) -> Iterator[bytes]:
        """Bytes `[start, end)` of `path` in blocks of up to `STREAM_BLOCK_BYTES` as they arrive.

        Raises:
            FileNotFoundError: 404. PermissionError: 403. S3StatusError: another error status. BodyCutShort: the
            body ended early. botocore's and urllib3's transport errors (connection reset, timeout) as they come.
        """
        from botocore.awsrequest import AWSPreparedRequest

        url = self.url(path)
        request = AWSPreparedRequest("GET", url, {"Range": f"bytes={start}-{end - 1}"}, None, True)
        response = self.session.send(request)
        raw = response.raw
        try:
            if response.status_code >= 400:
                raw.read()  # the error document, so the connection can serve the next request
                if response.status_code == 404:
                    raise FileNotFoundError(f"s3://{path}")
                if response.status_code == 403:
                    raise PermissionError(f"s3://{path}: access denied (HTTP 403)")
                raise S3StatusError(url, response)
            skip = start if response.status_code == 200 else 0  # a server that ignored the range sent it all
            length, got = response.headers.get("Content-Length"), 0
            for block in raw.stream(STREAM_BLOCK_BYTES):
                got += len(block)
                if skip:
                    block, skip = block[skip:], max(0, skip - len(block))
                if block:
                    yield block
            if length is not None and got < int(length):
                raise BodyCutShort(f"s3://{path}: the response ended after {got} of its {length} bytes")
        finally:
            if raw.length_remaining != 0:  # body bytes left unread (or unknown): the connection cannot be reused
                raw.close()
            raw.release_conn()
