"""Source `bucket`: a LeRobot v3.0 dataset under any fsspec URL (`s3://`, `gs://`, `hf://buckets/...`,
`file://`, `memory://`...), optionally with its metadata elsewhere (a Hub repo, as LeRobot's streaming
benchmark keeps `meta/` on the Hub and data and videos in a bucket: `--data-files-root`).

Storage options (endpoint URL, credentials profile, anonymous access) go to the filesystem of the bulk
files as given (`--storage-option KEY=VALUE`, `source_options={"storage_options": {...}}`). On S3 the
library's own retries are turned off (s3fs's `retries` attribute set to 1; botocore `total_max_attempts=1`
unless given), so every retry happens, and is counted, in `dl.kits.remote.source.RemoteSource`, and requests are
signed with SigV4 unless `config_kwargs` names another version, presigned URLs included: ranged reads and the
prefetch cache's downloads go through one presigned URL per object (`s3_presigned`), made by the process that
prepares the loader for the DataLoader workers it starts.
"""

import logging
import os
from collections.abc import Iterator
from contextlib import closing

import fsspec

from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.contracts.source import FileSpan
from dl.kits.remote.source import RemoteSource
from dl.kits.remote.store import STREAM_BLOCK_BYTES

from .hub import hub_filesystem, parse_repo, resolve_revision, trust_commit
from .options import DEFAULT_CACHE_BYTES, remote_kwargs
from .s3_presigned import PresignedRanges, presignable

log = logging.getLogger(__name__)

S3_SETTINGS = {"S3FileSystem": {"retries": 1}}
"""Attributes set on each process's s3fs instance: one attempt per call (s3fs takes no such option)."""


class BucketSource(RemoteSource):
    """A `RemoteSource` on any fsspec filesystem. On S3 a range's response body is read in blocks as it arrives:
    through a presigned URL of the object, in the calling thread (`s3_presigned`), or, for requests a URL cannot
    carry (requester pays, customer encryption keys), through s3fs's own aiobotocore client (the `get_object` call
    s3fs's `cat_file` makes); elsewhere in one piece. `prepare` presigns the selection's files, and the processes
    started after (DataLoader workers, forked or spawned) take those URLs: they read without a client of their own."""

    def __getstate__(self):
        ranges = self.__dict__.get("_presigned")
        urls = ranges.urls() if ranges is not None else self.__dict__.get("_presigned_urls")
        return {**super().__getstate__(), "_presigned": None, "_presigned_urls": urls}  # connections stay here

    def prepare(self, files: list[FileSpan]) -> int:
        """As `RemoteSource.prepare`, then presigns the files of `files` on S3 (local work, no request), so that the
        DataLoader workers this process starts read them without a client of their own. Presigning is local work,
        but s3fs may ask the server for a bucket's region first: where that fails, it is logged and each process
        presigns for itself when it reads (retried and counted as every request)."""
        needed = super().prepare(files)
        fs = self.fs
        if presignable(fs):
            paths = {path for span in files for where, path in [self._where(span.path)] if where is fs}
            try:
                self._presigned_ranges(fs).presign(sorted(paths))
            except Exception as exc:  # an optimisation only: the reads presign again, under the retry policy
                log.warning("%s: presigning the selection's files failed (%s); each process presigns its own",
                            self.url, exc)
        return needed

    def request_range(self, fs, path: str, start: int | None, end: int | None) -> bytes:
        """A bounded range of an S3 object through its presigned URL (as downloads go); else as the store does."""
        if start is None or end is None or not presignable(fs):
            return super().request_range(fs, path, start, end)
        out = bytearray()
        with closing(self._presigned_ranges(fs).stream(path, start, end)) as blocks:  # closed: its response too
            for block in blocks:
                out += block[:end - start - len(out)]
                if len(out) == end - start:
                    break
        return bytes(out)

    def stream_range(self, fs, path: str, start: int, end: int) -> Iterator[bytes]:
        if type(fs).__name__ != "S3FileSystem" or not hasattr(fs, "_call_s3"):  # another store, or another s3fs
            yield from super().stream_range(fs, path, start, end)
            return
        if presignable(fs):
            yield from self._presigned_ranges(fs).stream(path, start, end)
            return
        from fsspec.asyn import sync

        bucket, key, version = fs.split_path(path)
        version_kw = {"VersionId": version} if version else {}
        response = sync(fs.loop, fs._call_s3, "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}",
                        **version_kw)
        body = response["Body"]
        try:
            while block := sync(fs.loop, body.read, STREAM_BLOCK_BYTES):
                yield block
        finally:
            body.close()

    def _presigned_ranges(self, fs) -> PresignedRanges:
        """This process's `PresignedRanges` of `fs`, holding the URLs of the process that started this one."""
        ranges = self.__dict__.get("_presigned")
        if ranges is None or ranges.pid != os.getpid() or ranges.fs is not fs:  # none yet, or forked
            urls = ranges.urls() if ranges is not None else self.__dict__.pop("_presigned_urls", None)
            ranges = self.__dict__["_presigned"] = PresignedRanges(fs, urls)
        return ranges


def bucket_filesystem(url: str, storage_options: dict | None) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path without protocol) for `url`, with dl's retry defaults on S3.

    Raises:
        DlError: an unknown protocol, or options the filesystem refuses.
    """
    options = dict(storage_options or {})
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})  # the first try only
        config.setdefault("signature_version", "s3v4")  # presigned URLs too (`s3_presigned`), as every region takes
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
        cache_bytes: the local cache's byte limit for the whole DataLoader (each worker gets its share).
        prefetch_threads: download threads per reading process.
        block_size: bytes per request when a file is streamed instead of cached.
        retry_attempts: tries per request (transient errors: resets, timeouts, 429, 5xx).
        retry_deadline_s: stop retrying a request after this many seconds.
        cache_dir: the folder of the prefetch cache's run folders (default: node-local storage, `$SLURM_TMPDIR`
            or `$TMPDIR`, else dl's cache folder: `dl.kits.remote.run_folders.default_base`).

    Raises:
        DlError: an unusable URL or option; an unknown Hub repo or revision.
    """
    kwargs = remote_kwargs(prefetch, cache_bytes, prefetch_threads, block_size, retry_attempts, retry_deadline_s,
                           cache_dir)
    pinned = {}
    if root.startswith("hf://") and not root.startswith("hf://buckets/"):
        repo_id, rev, sub = parse_repo(root, revision)
        meta_fs = hub_filesystem(None)
        sha = resolve_revision(repo_id, rev, meta_fs.endpoint, kwargs["retry"])
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
        return BucketSource(meta_fs, meta_root, "bucket", fs_settings=S3_SETTINGS, **kwargs)
    fs, path = bucket_filesystem(data_files_root, storage_options)
    url = f"{fs.unstrip_protocol(path)} (metadata: {meta_fs.unstrip_protocol(meta_root)})"
    return BucketSource(fs, path, "bucket", url=url, meta_fs=meta_fs, meta_root=meta_root, pinned=pinned,
                        fs_settings=S3_SETTINGS, **kwargs)


@hookimpl
def register_sources(register):
    register("bucket", bucket_source, "a dataset under an fsspec URL (s3://, gs://, hf://buckets/...); retries, "
             "prefetch cache")
