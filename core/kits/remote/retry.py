"""Retrying remote calls: which errors are transient, and a bounded exponential backoff with jitter. Every request
of a remote source goes through `RetryPolicy.call` (`dl.kits.remote.store`). Transient: connection resets, timeouts,
cut bodies, HTTP 5xx and 429 (honouring `Retry-After`); permanent: 404, 401/403, other 4xx. The backoff is AWS's
"full jitter" (Brooker, "Exponential Backoff And Jitter", 2015): retry `n` waits a uniform draw from
`[0, min(max_s, base_s * 2**(n-1))]`, or the server's `Retry-After`.
"""

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ...contracts.errors import DlError, SourceFileNotFoundError

T = TypeVar("T")

TRANSIENT_NAMES = ("ClientPayloadError", "ServerDisconnectedError", "ClientConnectionError", "ClientOSError",
                   "IncompleteRead", "IncompleteReadError", "ResponseStreamingError", "ProtocolError",
                   "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError",
                   "HTTPClientError", "ResponseParserError", "FSTimeoutError", "TransportError", "RemoteProtocolError",
                   "ReadError", "WriteError", "ConnectError", "ReadTimeout", "ConnectTimeout", "PoolTimeout",
                   "ChunkedEncodingError")
"""Class names (in the class hierarchy) of aiohttp's, botocore's, httpx's, urllib3's and fsspec's transport errors."""

PERMANENT_NAMES = ("OfflineModeIsEnabled", "NoCredentialsError", "PartialCredentialsError")
"""Connection-like errors that no retry can fix (huggingface_hub's offline mode, missing AWS credentials)."""


class RemoteReadError(DlError):
    """A remote read failed for good (a permanent error, or transient ones past the budget), naming the URL."""


@dataclass(frozen=True)
class Failure:
    """How to handle one exception: `transient` (retry it), its HTTP `status`, the server's `Retry-After` seconds."""

    transient: bool
    status: int | None = None
    retry_after_s: float | None = None


def classify(exc: BaseException) -> Failure:
    """Whether `exc` (or one it wraps) is transient: `FileNotFoundError` / `PermissionError` are not; an HTTP status
    on it or its response is for 408, 429 and 5xx; transport errors (resets, timeouts, cut bodies) are."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    if any(type(e).__name__ in PERMANENT_NAMES for e in chain):
        return Failure(False)
    if any(isinstance(e, FileNotFoundError | PermissionError) for e in chain):
        return Failure(False, 404 if isinstance(chain[0], FileNotFoundError) else 403)
    for e in chain:
        status, retry_after = _http_status(e)
        if status is not None:
            return Failure(status in (408, 429) or status >= 500, status, retry_after)
    for e in chain:
        names = {cls.__name__ for cls in type(e).__mro__}
        if isinstance(e, ConnectionError | TimeoutError | EOFError) or names & set(TRANSIENT_NAMES):
            return Failure(True)
    return Failure(False)


def _http_status(exc: BaseException) -> tuple[int | None, float | None]:
    """(status, Retry-After seconds) from an httpx/requests-style response, a botocore error response, or an
    aiohttp `ClientResponseError`."""
    response = getattr(exc, "response", None)
    headers: dict = {}
    status = None
    if isinstance(response, dict):  # botocore ClientError
        meta = response.get("ResponseMetadata", {})
        status, headers = meta.get("HTTPStatusCode"), meta.get("HTTPHeaders") or {}
    elif response is not None and isinstance(getattr(response, "status_code", None), int):
        status, headers = response.status_code, response.headers
    elif isinstance(getattr(exc, "status", None), int) and type(exc).__name__ == "ClientResponseError":
        status, headers = exc.status, getattr(exc, "headers", None) or {}
    if status is None:
        return None, None
    return status, _retry_after(headers)


def _retry_after(headers) -> float | None:
    """A `Retry-After` in seconds (None: absent, or an HTTP date: dl's own backoff then)."""
    try:
        return max(0.0, float(headers.get("Retry-After") or headers.get("retry-after")))
    except (AttributeError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    Args:
        attempts: tries per request, the first included (>= 1).
        base_s: the first backoff ceiling in seconds; it doubles per attempt.
        max_s: the largest single wait in seconds (also caps a server's `Retry-After`).
        deadline_s: stop retrying once this many seconds have passed since the first attempt.
        seed: seeds the jitter (None: from the OS), so a test can reproduce the waits.
    """

    attempts: int = 6
    base_s: float = 0.1
    max_s: float = 5.0
    deadline_s: float = 120.0
    seed: int | None = None

    def __post_init__(self):
        if self.attempts < 1:
            raise DlError(f"retries: attempts must be >= 1, got {self.attempts}.")

    def wait_s(self, attempt: int, failure: Failure, rng: random.Random) -> float:
        """Seconds to wait before retry number `attempt` (1 = the first retry)."""
        if failure.retry_after_s is not None:
            return min(failure.retry_after_s, self.max_s)
        return rng.uniform(0.0, min(self.max_s, self.base_s * 2 ** (attempt - 1)))

    def call(self, fn: Callable[[], T], url: str, on_retry: Callable[[Failure], None] | None = None) -> T:
        """`fn()` (one request, safe to repeat), retried while it fails transiently, within `attempts` and
        `deadline_s`; `url` names it in errors; `on_retry` is called with each transient failure before its retry.
        Raises `SourceFileNotFoundError` (404 / `FileNotFoundError`: never retried) and `RemoteReadError` (any other
        permanent error, or the last transient one once the budget is spent)."""
        rng = random.Random(self.seed)
        t0 = time.monotonic()
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except DlError:
                raise
            except Exception as exc:
                failure = classify(exc)
                if failure.status == 404 or (not failure.transient and isinstance(exc, FileNotFoundError)):
                    raise SourceFileNotFoundError(f"{url} does not exist.") from exc
                if not failure.transient:
                    code = f" (HTTP {failure.status})" if failure.status else ""
                    raise RemoteReadError(f"reading {url} failed{code}: {type(exc).__name__}: {exc}. Not retried: "
                                          "the error is permanent (check credentials, the endpoint and the path)."
                                          ) from exc
                wait = self.wait_s(attempt, failure, rng)
                spent = time.monotonic() - t0
                if attempt == self.attempts or spent + wait > self.deadline_s:
                    code = f" (HTTP {failure.status})" if failure.status else ""
                    raise RemoteReadError(
                        f"reading {url} failed after {attempt} attempt(s) in {spent:.1f} s{code}: "
                        f"{type(exc).__name__}: {exc}. The server or network kept failing; check the endpoint, "
                        "or raise the source options retry_attempts / retry_deadline_s.") from exc
                if on_retry is not None:
                    on_retry(failure)
                time.sleep(wait)
        raise AssertionError("unreachable")
