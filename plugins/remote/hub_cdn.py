"""Range requests to the Hub's large files through the CDN URL their `resolve` URL redirects to.

The Hub serves the files it stores with Git LFS or Xet (videos and parquet files, by its default `.gitattributes`)
from a CDN: their `resolve` URL at a commit answers with a redirect to a signed CDN URL (valid about an hour).
huggingface_hub's own file readers (`HfFileSystem`) ask `resolve` again for every range, and the Hub limits
`resolve` requests (3000 per 5 minutes per address without a token, 5000 with a free account:
https://huggingface.co/docs/hub/rate-limits), which a streaming run making tens of range requests a second reaches
within minutes. `CdnLinks` resolves a file once per process (one thread asks while the others wait for its answer)
and sends the file's ranges to the CDN URL for `LINK_REUSE_S` seconds; the Hub token goes to the Hub's own origin
only, as huggingface_hub keeps it from CDN redirects.
"""

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urljoin, urlsplit

from dl.kits.remote.retry import RemoteReadError

LINK_REUSE_S = 300.0
"""Seconds a process sends a file's ranges to the CDN URL its `resolve` redirected to, before resolving it again
(the Hub signs CDN URLs for about an hour; one refused earlier is resolved again at once)."""
STALE_LINK = (401, 403, 404, 410)
"""Statuses of a CDN URL that no longer serves (an expired or revoked signature): the file is resolved again."""
MAX_REDIRECTS = 5
"""Redirects followed from a `resolve` URL (a renamed repo, then the CDN, then the CDN's own)."""
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
        """A GET of repo file `path`, whose `resolve` URL is `url`, with `headers` (its `Range`), through an httpx
        `session` (huggingface_hub's), the response's body not read yet (closed on leaving). It goes to the file's
        CDN URL while this process holds one younger than `LINK_REUSE_S`, else to `url`, whose redirects are
        followed by hand (at most `MAX_REDIRECTS`) and the first one off the Hub's origin kept as the file's CDN URL.
        A CDN URL refused (`STALE_LINK`) is dropped and the file resolved again, once. `count()` is called for
        each HTTP request past the first (the caller counts one per try).

        Raises:
            RemoteReadError: more than `MAX_REDIRECTS` redirects. httpx's transport errors as they come.
        """
        sent = []

        def send(target: str):
            if sent:
                count()
            sent.append(target)
            return _send(session, target, url, headers)

        response, link = None, self._fresh(path)
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
                    response, link = self._resolve(send, path, url)
            if response is None:
                response = send(link)
        try:
            while response.has_redirect_location:  # a CDN URL may redirect on (not kept)
                if len(sent) > MAX_REDIRECTS + 1:
                    raise RemoteReadError(f"{url}: more than {MAX_REDIRECTS} redirects")
                response = _next(response, send)
            yield response
        finally:
            response.close()

    def _resolve(self, send, path: str, url: str) -> tuple[object, str | None]:
        """`(response, None)` of `url` when it does not redirect off the Hub's origin (the file itself: not an LFS
        file, or an error); `(None, CDN URL)`, kept as `path`'s, when it does."""
        response = send(url)
        for _ in range(MAX_REDIRECTS):
            if not response.has_redirect_location:
                return response, None
            target = urljoin(str(response.url), response.headers["Location"])
            if _origin(target) != _origin(url):
                response.read()  # a few bytes: the connection serves the next request
                response.close()
                self.urls[path] = (target, time.time())
                return None, target
            response = _next(response, send)
        response.close()
        raise RemoteReadError(f"{url}: more than {MAX_REDIRECTS} redirects")

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


def _next(response, send):
    """The request `response` (a redirect, its body read and closed here) redirects to."""
    target = urljoin(str(response.url), response.headers["Location"])
    response.read()
    response.close()
    return send(target)


def _send(session, target: str, url: str, headers: dict):
    """A GET of `target` with `headers` (those of the request to `url`), its body not read yet; the Hub token goes
    only to `url`'s origin."""
    if _origin(target) != _origin(url):
        headers = {key: value for key, value in headers.items() if key.lower() != "authorization"}
    return session.send(session.build_request("GET", target, headers=headers, timeout=TIMEOUT_S), stream=True,
                        follow_redirects=False)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)
