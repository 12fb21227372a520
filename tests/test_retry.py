"""dl.kits.remote.retry: which errors are transient (on the exception types the remote libraries really raise), and
the retry loop: bounded attempts, Retry-After honoured, permanent errors never retried, a clear error."""

import botocore.exceptions
import httpx2
import pytest
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from dl.contracts.errors import SourceFileNotFoundError
from dl.kits.remote.retry import RemoteReadError, RetryPolicy, classify

FAST = RetryPolicy(attempts=4, base_s=0.0, max_s=0.0, seed=0)


def client_error(status: int, code: str, retry_after: str | None = None) -> botocore.exceptions.ClientError:
    headers = {"retry-after": retry_after} if retry_after else {}
    response = {"Error": {"Code": code, "Message": code},
                "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": headers}}
    return botocore.exceptions.ClientError(response, "GetObject")


def hub_error(status: int, headers: dict | None = None) -> HfHubHTTPError:
    response = httpx2.Response(status, headers=headers or {}, request=httpx2.Request("GET", "http://127.0.0.1/x"))
    return HfHubHTTPError(f"{status}", response=response)


def wrapped(cause: BaseException) -> OSError:
    """What s3fs raises: its own OSError with the botocore error as the cause."""
    exc = OSError(5, str(cause))
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(("exc", "transient", "status", "retry_after"), [
    (ConnectionResetError(104, "Connection reset by peer"), True, None, None),
    (TimeoutError("timed out"), True, None, None),
    (botocore.exceptions.EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True, None, None),
    (botocore.exceptions.ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True, None, None),
    (wrapped(client_error(503, "ServiceUnavailable")), True, 503, None),
    (wrapped(client_error(429, "TooManyRequests", "3")), True, 429, 3.0),
    (wrapped(client_error(403, "AccessDenied")), False, 403, None),
    (hub_error(429, {"Retry-After": "2"}), True, 429, 2.0),
    (hub_error(502), True, 502, None),
    (hub_error(401), False, 401, None),
    (httpx2.RemoteProtocolError("peer closed connection without sending complete message body"), True, None, None),
    (FileNotFoundError("s3://b/x"), False, 404, None),
    (PermissionError("denied"), False, 403, None),
    (OfflineModeIsEnabled("offline"), False, None, None),
    (ValueError("a bug"), False, None, None),
])
def test_classify(exc, transient, status, retry_after):
    failure = classify(exc)
    assert (failure.transient, failure.status, failure.retry_after_s) == (transient, status, retry_after)


def test_transient_errors_are_retried_and_counted():
    calls, retries = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError(104, "reset")
        return b"data"

    assert FAST.call(flaky, "s3://b/x", retries.append) == b"data"
    assert len(calls) == 3 and len(retries) == 2


def test_gives_up_naming_the_url_and_attempts():
    def down():
        raise hub_error(503)

    with pytest.raises(RemoteReadError, match=r"hf://datasets/a/b/x.mp4 failed after 4 attempt\(s\).*HTTP 503"):
        FAST.call(down, "hf://datasets/a/b/x.mp4")


@pytest.mark.parametrize(("exc", "error"), [(FileNotFoundError("x"), SourceFileNotFoundError),
                                            (wrapped(client_error(403, "AccessDenied")), RemoteReadError)])
def test_permanent_errors_are_not_retried(exc, error):
    calls = []

    def fail():
        calls.append(1)
        raise exc

    with pytest.raises(error, match="s3://b/x"):
        FAST.call(fail, "s3://b/x")
    assert len(calls) == 1


def test_retry_after_is_honoured_within_max_s():
    import random

    policy = RetryPolicy(base_s=1.0, max_s=5.0)
    assert policy.wait_s(1, classify(hub_error(429, {"Retry-After": "2"})), random.Random(0)) == 2.0
    assert policy.wait_s(1, classify(hub_error(429, {"Retry-After": "60"})), random.Random(0)) == 5.0
    waits = [policy.wait_s(n, classify(hub_error(503)), random.Random(n)) for n in range(1, 8)]
    assert all(0 <= w <= min(5.0, 2 ** (n - 1)) for n, w in zip(range(1, 8), waits, strict=True))
