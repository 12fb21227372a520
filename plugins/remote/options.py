"""The options both remote sources take, turned into `dl.kits.remote.source.RemoteOptions`."""

from dl.contracts.errors import DlError
from dl.contracts.units import parse_bytes
from dl.kits.remote.retry import RetryPolicy
from dl.kits.remote.source import RemoteOptions

DEFAULT_CACHE_BYTES = 8_000_000_000


def remote_options(prefetch: bool, cache_bytes: int | str, prefetch_threads: int, block_size: int | str,
                  retry_attempts: int, retry_deadline_s: float, cache_dir: str | None = None) -> RemoteOptions:
    """Check the shared options and build a source's `RemoteOptions`.
    Raises DlError: an option out of range, naming it."""
    cache_bytes = parse_bytes(cache_bytes, "source option cache_bytes")  # 8G as well as 8000000000
    block_size = parse_bytes(block_size, "source option block_size")
    checks = {"cache_bytes": cache_bytes >= 1, "prefetch_threads": prefetch_threads >= 1, "block_size": block_size >= 1,
              "retry_attempts": retry_attempts >= 1, "retry_deadline_s": retry_deadline_s > 0}
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise DlError(f"source option(s) {', '.join(bad)} must be positive (retry_attempts and the thread count "
                      ">= 1).")
    if not isinstance(prefetch, bool):
        raise DlError(f"source option prefetch must be true or false, got {prefetch!r}.")
    if cache_dir is not None and (not isinstance(cache_dir, str) or not cache_dir):
        raise DlError(f"source option cache_dir must be a folder path, got {cache_dir!r}.")
    return RemoteOptions(prefetch=prefetch, cache_bytes=int(cache_bytes), cache_dir=cache_dir,
                         prefetch_threads=int(prefetch_threads), block_size=int(block_size),
                         retry=RetryPolicy(attempts=int(retry_attempts), deadline_s=float(retry_deadline_s)))
