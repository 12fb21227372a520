"""Source `bucket`: a LeRobot v3.0 dataset under any fsspec URL (`s3://`, `gs://`, `hf://buckets/...`, `file://`...),
optionally with its metadata on the Hub (as LeRobot's streaming benchmark keeps it: `--data-files-root`). Storage
options go to the bulk files' filesystem as given (`--storage-option KEY=VALUE`). On S3 the library's own retries
are off (s3fs's `retries` 1, botocore `total_max_attempts=1` unless given): every retry is dl's, counted.
"""

import fsspec

from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.kits.remote.source import RemoteSource

from .hub import hub_filesystem, parse_repo, resolve_revision, trust_commit
from .options import DEFAULT_CACHE_BYTES, remote_options


class BucketSource(RemoteSource):
    """A `RemoteSource` on any fsspec filesystem: each range is one `cat_file` of the store (on S3, aiobotocore's
    `get_object` through s3fs's client in each process)."""

    def _tuned(self, fs):
        """One attempt per s3fs call (its `retries` attribute, which its constructor does not take)."""
        if type(fs).__name__ == "S3FileSystem":
            fs.retries = 1
        return fs


def bucket_filesystem(url: str, storage_options: dict | None) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path without protocol) for `url`, with dl's retry defaults on S3.
    Raises DlError: an unknown protocol, or options the filesystem refuses."""
    options = dict(storage_options or {})
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})  # the first try only
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
