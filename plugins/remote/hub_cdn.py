"""Range requests to the Hub's large files through the CDN URL their `resolve` URL redirects to. The Hub serves
LFS and Xet files (videos, parquet) from a CDN, through a signed URL (valid about an hour) its `resolve` URL
redirects to; `HfFileSystem` asks `resolve` again for every range, and the Hub limits `resolve` requests (3000 per 5
minutes per address without a token: https://huggingface.co/docs/hub/rate-limits), which a streaming run reaches
within minutes. `CdnLinks` resolves a file once per process and sends its ranges to the CDN URL for `LINK_REUSE_S`.
"""

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

LINK_REUSE_S = 300.0
"""Seconds a process uses a file's CDN URL before resolving it again (the Hub signs them for about an hour)."""
STALE_LINK = (401, 403, 404, 410)
"""Statuses of a CDN URL that no longer serves (an expired or revoked signature): the file is resolved again."""
TIMEOUT_S = 60.0
"""Seconds a connection or a read may stall before the request fails (a transient error: retried)."""


class CdnLinks:
    """One process's CDN URLs of the repo files it resolved, `{path: (url, time.time() when resolved)}` (pickled
    with them, so DataLoader workers start with the host's; without its locks: each process makes its own)."""

    def __init__(self):
        self.urls: dict[str, tuple[str, float]] = {}
        self._own_locks()

    def __getstate__(self):
        return {"urls": dict(self.urls)}

    def __setstate__(self, state):
        self.urls = state["urls"]
        self._own_locks()

    def _own_locks(self) -> None:
        self._pid, self._guard, self._locks = os.getpid(), threading.Lock(), {}

    @contextmanager
    def get(self, session, path: str, url: str, headers: dict, count: Callable[[], None]) -> Iterator:
        """A GET of repo file `path` (`resolve` URL `url`, `headers` with its `Range`) through an httpx `session`,
        the body not read yet (closed on leaving): to the file's CDN URL while this process holds one younger than
        `LINK_REUSE_S`, else to `url`, whose redirects httpx follows, keeping where they end on another origin as the
        file's CDN URL. A CDN URL refused (`STALE_LINK`) is dropped and the file resolved again, once. `count()` is
        called for each HTTP request past the first. Raises httpx's errors as they come."""
        sent = []

        def send(target: str):
            if sent:
                count()
            sent.append(target)
            ours = _origin(target) == _origin(url)  # the Hub token goes to the Hub's origin only
            sent_headers = headers if ours else {k: v for k, v in headers.items() if k.lower() != "authorization"}
            request = session.build_request("GET", target, headers=sent_headers, timeout=TIMEOUT_S)
            response = session.send(request, stream=True, follow_redirects=True)
            for _ in response.history:
                count()
            return response

        link, response = self._fresh(path), None
        if link is not None:
            response = send(link)
            if response.status_code in STALE_LINK:
                response.close()
                self._drop(path, link)
                response = None
        if response is None:
            with self._lock(path):  # one thread resolves the file; the others wait for its link
                link = self._fresh(path)
                if link is None:
                    response = send(url)
                    if _origin(str(response.url)) != _origin(url):
                        self.urls[path] = (str(response.url), time.time())
            if response is None:
                response = send(link)
        try:
            yield response
        finally:
            response.close()

    def _fresh(self, path: str) -> str | None:
        link = self.urls.get(path)
        return link[0] if link is not None and 0 <= time.time() - link[1] < LINK_REUSE_S else None

    def _drop(self, path: str, link: str) -> None:
        if self.urls.get(path, ("",))[0] == link:  # not one another thread resolved meanwhile
            self.urls.pop(path, None)

    def _lock(self, path: str) -> threading.Lock:
        if self._pid != os.getpid():  # forked: a lock another thread held at the fork stays held here
            self._own_locks()
        with self._guard:
            return self._locks.setdefault(path, threading.Lock())


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)
