"""Ranged GETs through httpx to a signed URL kept per file. The Hub serves LFS and Xet files from a CDN through a signed
URL (about an hour) its `resolve` URL redirects to, and limits `resolve` requests (https://huggingface.co/docs/hub/
rate-limits). DataLoader workers start with the URLs of the process that prepared the run: no `resolve` of their own.
"""

import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from dl.kits.process_local import ProcessLocal
from dl.kits.remote.source_counters import SourceCounters
from dl.kits.remote.store import STREAM_BLOCK_BYTES

STALE_LINK = (400, 401, 403, 404, 410)
"""Statuses of a kept URL that no longer serves (an expired or revoked signature): the file is resolved again."""
TIMEOUT_S = 60.0
"""Seconds a connection or a read may stall before the request fails (a transient error: retried)."""


class StatusError(OSError):
    """An error status, naming the URL without its query (a signature); `response` for `retry.classify`."""

    def __init__(self, response):
        self.response = response
        super().__init__(f"HTTP {response.status_code} for {str(response.url).split('?')[0]}")


class Links:
    """One process's signed URLs, `{path: (url, time.time() when made)}`, each used for `reuse_s` seconds (its locks
    are each process's own, `dl.kits.process_local`): where a file's `resolve` URL redirects to on another origin (a
    small file is served by the Hub itself, and not kept)."""

    def __init__(self, reuse_s: float):
        self.reuse_s, self.urls = reuse_s, {}
        self._locks: ProcessLocal[dict[str, threading.Lock]] = ProcessLocal(dict)  # a lock per file being resolved

    def __getstate__(self):
        return {**self.__dict__, "urls": dict(self.urls)}  # a copy: other threads may keep URLs meanwhile

    def keep(self, urls: dict[str, str], made: float) -> None:
        """Keep `urls` (`{path: url}`, signed at `made`, `time.time()`) for the files' next ranges."""
        self.urls.update((path, (url, made)) for path, url in urls.items())

    def fresh(self, path: str) -> str | None:
        """The file's kept URL while it is younger than `reuse_s`, else None."""
        link = self.urls.get(path)
        return link[0] if link is not None and 0 <= time.time() - link[1] < self.reuse_s else None

    def stream(self, session, path: str, resolve: Callable[[], str], headers: dict, start: int,
               counters: SourceCounters) -> Iterator[bytes]:
        """The body of a GET of file `path` (`headers` with its `Range`, from byte `start`) through httpx `session` in
        blocks as they arrive: to its `fresh` URL (without `Authorization`), else to `resolve()`'s, following redirects,
        keeping where it ends on another origin. A kept URL refused (`STALE_LINK`) is dropped and
        the file resolved again, once. Each request past the first counts in `counters`' `requests`. Raises
        `StatusError` (an error status), what `resolve` raises, httpx's errors."""
        sent = []

        def send(target: str, with_headers: dict):
            if sent:
                counters.add("requests")
            sent.append(target)
            response = session.send(session.build_request("GET", target, headers=with_headers, timeout=TIMEOUT_S),
                                    stream=True, follow_redirects=True)
            for _ in response.history:
                counters.add("requests")
            return response

        unsigned = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        link, response = self.fresh(path), None
        if link is not None:
            response = send(link, unsigned)
            if response.status_code in STALE_LINK:
                response.close()
                if self.urls.get(path, ("",))[0] == link:  # not one another thread resolved meanwhile
                    self.urls.pop(path, None)
                response = None
        if response is None:
            with self._lock(path):  # one thread resolves the file; the others wait for its URL
                link = self.fresh(path)
                if link is None:
                    url = resolve()
                    response = send(url, headers)
                    if _origin(str(response.url)) != _origin(url):
                        self.keep({path: str(response.url)}, time.time())
            if response is None:
                response = send(link, unsigned)
        try:
            if response.status_code >= 400:
                response.read()  # the error document, so the connection can serve the next request
                raise StatusError(response)
            skip = start if response.status_code == 200 else 0
            for block in response.iter_bytes(STREAM_BLOCK_BYTES):
                if skip:
                    block, skip = block[skip:], max(0, skip - len(block))
                if block:
                    yield block
        finally:
            response.close()

    def _lock(self, path: str) -> threading.Lock:
        """This process's lock for resolving `path` (`dict.setdefault` is atomic: two threads get the same one)."""
        return self._locks.get().setdefault(path, threading.Lock())


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)
