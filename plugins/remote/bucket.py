"""Source `bucket`: a LeRobot v3.0 dataset under any fsspec URL (`s3://`, `gs://`, `hf://buckets/...`, `file://`...),
optionally with its metadata on the Hub (as LeRobot's streaming benchmark keeps it: `--data-files-root`). Storage
options go to the bulk files' filesystem as given (`--storage-option KEY=VALUE`). On S3 the library's own retries
are off (s3fs's `retries` 1, botocore `total_max_attempts=1` unless given): every retry is dl's, counted. An S3 range
is a GET of the object's presigned URL through httpx (`dl.plugins.remote.links`), signed where the run is prepared
and carried to the DataLoader workers: no S3 client there unless a URL is refused or old (then signed again).
"""

import os
import time
from collections.abc import Iterator

import fsspec

from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.contracts.source import FileSpan
from dl.kits.remote.source import RemoteSource

from .hub import hub_filesystem, parse_repo, resolve_revision, trust_commit
from .links import TIMEOUT_S, Links
from .options import DEFAULT_CACHE_BYTES, remote_options

EXPIRES_S = 12 * 3600
"""A presigned URL's lifetime in seconds (signed again when refused, e.g. its credentials expired, or 10 min before)."""


class BucketSource(RemoteSource):
    """A `RemoteSource` on any fsspec filesystem; on S3 (`presignable`) ranges through presigned URLs."""

    def __init__(self, fs, root: str, name: str, **kwargs):
        super().__init__(fs, root, name, **kwargs)
        self._links, self._http = Links(EXPIRES_S - 600, signed=True), None  # _http: (pid, its httpx client)

    def __getstate__(self):
        return {**super().__getstate__(), "_http": None}  # each process makes its own connections

    def _tuned(self, fs):
        """One attempt per s3fs call (its `retries` attribute, which its constructor does not take)."""
        if type(fs).__name__ == "S3FileSystem":
            fs.retries = 1
        return fs

    def prepare(self, files: list[FileSpan]) -> int:
        """As `RemoteSource.prepare`, then presigns the files of `files` on S3 (local work, no request) for the
        DataLoader workers this process starts."""
        needed, fs = super().prepare(files), self.fs
        todo = sorted({self.path(span.path) for span in files} - {p for p in self._links.urls if self._links.fresh(p)})
        if todo and presignable(fs):
            self._links.keep(_presign(fs, todo), time.time())
        return needed

    def stream_range(self, fs, path: str, start: int | None, end: int | None) -> Iterator[bytes]:
        """A bounded range on S3: a GET of the object's presigned URL (`Links.stream`); else as the store's."""
        if start is None or end is None or not presignable(fs):
            yield from super().stream_range(fs, path, start, end)
            return
        if self._http is None or self._http[0] != os.getpid():
            import httpx2

            verify = (fs.client_kwargs or {}).get("verify")
            self._http = (os.getpid(), httpx2.Client(timeout=TIMEOUT_S, verify=True if verify is None else verify))
        yield from self._links.stream(self._http[1], path, lambda: _presign(fs, [path])[path],
                                      {"Range": f"bytes={start}-{end - 1}"}, start, self.counters)


def presignable(fs) -> bool:
    """Whether `fs` is s3fs, anonymous or signing with a named version (SigV4: `bucket_filesystem`; S3 regions opened
    since 2014 refuse SigV2), with no request option a URL cannot carry (requester pays, SSE-C: `req_kw`...)."""
    signed = getattr(fs, "anon", False) or (getattr(fs, "config_kwargs", None) or {}).get("signature_version")
    return (type(fs).__name__ == "S3FileSystem" and hasattr(fs, "get_s3") and bool(signed)
            and not getattr(fs, "req_kw", None) and not getattr(fs, "s3_additional_kwargs", None))


def _presign(fs, paths: list[str]) -> dict[str, str]:
    """`{path: presigned GET URL}` of `paths` through `fs`'s client of each bucket. Raises botocore's errors."""
    from fsspec.asyn import sync

    async def presign() -> dict[str, str]:
        await fs.set_session()
        urls = {}
        for path in paths:
            bucket, key, version = fs.split_path(path)
            params = {"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {})}
            client = await fs.get_s3(bucket)
            urls[path] = await client.generate_presigned_url("get_object", Params=params, ExpiresIn=EXPIRES_S)
        return urls

    return sync(fs.loop, presign)


def bucket_filesystem(url: str, storage_options: dict | None) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path without protocol) for `url`, with dl's retry defaults on S3.
    Raises DlError: an unknown protocol, or options the filesystem refuses."""
    options = dict(storage_options or {})
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})  # the first try only
        config.setdefault("signature_version", "s3v4")  # as every region takes
        options["config_kwargs"] = config
    try:
        return fsspec.core.url_to_fs(url, **options)
    except (ImportError, ValueError, TypeError) as exc:
        raise DlError(f"cannot open {url} with storage options {sorted(options)}: {exc}") from None


def bucket_source(root: str, data_files_root: str | None = None, revision: str | None = None,
                  storage_options: dict | None = None, prefetch: bool = True,
                  cache_bytes: int | str = DEFAULT_CACHE_BYTES, prefetch_threads: int = 4,
                  block_size: int | str = 1 << 20, retry_attempts: int = 6,
                  retry_deadline_s: float = 120.0, cache_dir: str | None = None) -> RemoteSource:
    """A dataset under an fsspec URL (S3, GCS, Hugging Face buckets, ...), metadata from there or the Hub.

    Args:
        root: the dataset root URL holding `meta/` (and data and videos unless `data_files_root` is given),
            e.g. `s3://bucket/dataset`, or `hf://datasets/owner/name` for metadata on the Hub.
        data_files_root: where `data/` and `videos/` live when not under `root`, e.g. `s3://bucket/dataset`.
        revision: the Hub revision when `root` is an `hf://datasets/` repo (resolved to its sha once per run).
        storage_options: the bulk files' filesystem options, e.g. `endpoint_url`, `profile`, `anon`, `key`.
        prefetch: download each admitted episode's files in the background into the local cache.
        cache_bytes: the byte limit of this host's block cache.
        prefetch_threads: download threads per reading process.
        block_size: bytes per request when a file is streamed instead of cached.
        retry_attempts: tries per request (transient errors: resets, timeouts, 429, 5xx).
        retry_deadline_s: stop retrying a request after this many seconds.
        cache_dir: where this host's block cache goes (default: node-local storage, `$SLURM_TMPDIR` or `$TMPDIR`,
            else dl's cache folder: `dl.kits.remote.host_cache.default_base`).

    Raises:
        DlError: an unusable URL or option; an unknown Hub repo or revision.
    """
    options = remote_options(prefetch, cache_bytes, prefetch_threads, block_size, retry_attempts, retry_deadline_s,
                            cache_dir)
    pinned = {}
    if root.startswith("hf://") and not root.startswith("hf://buckets/"):
        repo_id, rev, sub = parse_repo(root, revision)
        meta_fs = hub_filesystem(None)
        sha = resolve_revision(repo_id, rev, meta_fs.endpoint, options.retry)
        trust_commit(meta_fs, repo_id, sha)
        meta_root = f"datasets/{repo_id}@{sha}" + (f"/{sub}" if sub else "")
        pinned["revision"] = sha
    elif revision is not None:
        raise DlError(f"source option revision applies to a Hub root (hf://datasets/...), not {root}.")
    else:
        meta_fs, meta_root = bucket_filesystem(root, storage_options)
    if data_files_root is None:
        if pinned:
            raise DlError(f"--root {root} is a Hub repo: give --data-files-root for the data and videos (or use "
                          "--source hub to read everything from the Hub).")
        return BucketSource(meta_fs, meta_root, "bucket", options=options)
    fs, path = bucket_filesystem(data_files_root, storage_options)
    return BucketSource(fs, path, "bucket", options=options, meta=(meta_fs, meta_root), pinned=pinned)


@hookimpl
def register_sources(register):
    register("bucket", bucket_source, "a dataset under an fsspec URL (s3://, gs://, hf://buckets/...); retries, "
             "prefetch cache")
