"""Source `hub`: a LeRobot v3.0 dataset repo on the Hugging Face Hub, read through huggingface_hub at one commit.
The revision (default `main`) is resolved to its sha once, by the process that opens the source, and every read
names that sha, so a push during training cannot mix two versions; `pinned_options()` hands it to runs, ranks and
workers. `HF_ENDPOINT`, `HF_TOKEN` and `HF_HUB_OFFLINE` are huggingface_hub's settings (offline: the revision's
snapshot in the local Hugging Face cache). The token never appears in a URL, an option, a message or a result.
"""

import os
import re
from collections.abc import Iterator

import fsspec

from dl.contracts.errors import DlError
from dl.contracts.hookspecs import hookimpl
from dl.contracts.source import Source
from dl.kits.process_local import ProcessLocal
from dl.kits.remote.retry import RetryPolicy
from dl.kits.remote.source import RemoteOptions, RemoteSource

from .links import Links
from .options import DEFAULT_CACHE_BYTES, remote_options

SHA = re.compile(r"^[0-9a-f]{40}$")
LINK_REUSE_S = 300.0
"""Seconds a process uses a file's CDN URL before resolving it again (the Hub signs them for about an hour)."""


class HubSource(RemoteSource):
    """A `RemoteSource` on an `HfFileSystem` whose byte ranges are GETs with huggingface_hub's headers through a client
    of each process's own (`range_client`; huggingface_hub's retry loop would hide retries from dl's), to the CDN URL
    of a large file (`links`)."""

    def __init__(self, fs, root: str, repo_id: str, sha: str, options: RemoteOptions):
        self.repo_id, self.sha = repo_id, sha
        self._links = Links(LINK_REUSE_S)
        self._client = ProcessLocal(range_client)
        super().__init__(fs, root, "hub", options=options, pinned={"revision": sha})

    def _tuned(self, fs):
        """`fs` told that the pinned commit exists, so no process asks the Hub about the revision again."""
        trust_commit(fs, self.repo_id, self.sha)
        return fs

    def stream_range(self, fs, path: str, start: int | None, end: int | None) -> Iterator[bytes]:
        """The response body in blocks as they arrive, through this process's `range_client`, to the file's CDN URL
        once resolved (`Links.stream`)."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers

        rel = path[len(f"datasets/{self.repo_id}@{self.sha}/"):]
        url = hf_hub_url(self.repo_id, rel, repo_type="dataset", revision=self.sha, endpoint=fs.endpoint)
        headers = build_hf_headers(token=fs.token)
        if start is not None or end is not None:
            headers["Range"] = f"bytes={start or 0}-{'' if end is None else end - 1}"
        yield from self._links.stream(self._client.get(), path, lambda: url, headers, start or 0, self.counters)


def range_client():
    """An HTTP client for one process's byte ranges, made as huggingface_hub's default session is (its HTTP library:
    httpx2 from huggingface_hub 2, httpx before; redirects followed; each request's timeout set by `Links`). Not
    huggingface_hub's shared session: huggingface_hub closes that in a forked child, which would wait forever on a
    lock a download thread of the parent held inside a request; this one is each process's own and never closed in
    another (`dl.kits.process_local`)."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx

    return httpx.Client(follow_redirects=True, timeout=None)


def parse_repo(root: str, revision: str | None) -> tuple[str, str, str]:
    """`(repo_id, revision, path in repo)` from `[hf://][datasets/]owner/name[@rev][/path]`.
    Raises DlError: not a repo id, or a revision in `root` that contradicts `revision`."""
    text = root.removeprefix("hf://").removeprefix("datasets/").strip("/")
    parts = text.split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise DlError(f"--root {root}: give a Hub dataset repo as owner/name (or hf://datasets/owner/name).")
    name, _, in_root = parts[1].partition("@")
    if in_root and revision and in_root != revision:
        raise DlError(f"--root {root} names revision {in_root!r} but the revision option says {revision!r}; give one.")
    return f"{parts[0]}/{name}", in_root or revision or "main", "/".join(parts[2:])


def resolve_revision(repo_id: str, revision: str, endpoint: str | None, retry: RetryPolicy) -> str:
    """The commit sha of `revision` of dataset repo `repo_id` (a sha is returned as is, without a request). Raises
    DlError (the repo or revision does not exist, or is private: no token), RemoteReadError (the Hub kept failing)."""
    if SHA.match(revision):
        return revision
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=endpoint)
    where = f"{repo_id} on {api.endpoint}"
    try:
        info = retry.call(lambda: api.dataset_info(repo_id, revision=revision), f"hf://datasets/{repo_id}@{revision}")
    except (DlError, FileNotFoundError) as exc:  # the policy turns a 404 into SourceFileNotFoundError
        if isinstance(exc.__cause__, RevisionNotFoundError):
            raise DlError(f"dataset {where} has no revision {revision!r}: give an existing branch, tag or commit "
                          "with --revision.") from None
        if isinstance(exc.__cause__, RepositoryNotFoundError):
            raise DlError(f"no dataset repo {where}, or it is private or gated: check the repo id, and log in "
                          "(`hf auth login` or HF_TOKEN) if it needs a token.") from None
        raise
    return info.sha


def trust_commit(fs: fsspec.AbstractFileSystem, repo_id: str, sha: str) -> None:
    """Tell `fs` that dataset `repo_id` has commit `sha`, so it does not ask again in each process (HfFileSystem
    keeps that check in a private cache; nothing happens where a version has none)."""
    checked = getattr(fs, "_repo_and_revision_exists_cache", None)
    if isinstance(checked, dict):
        checked[("dataset", repo_id, sha)] = (True, None)


def hub_filesystem(storage_options: dict | None) -> fsspec.AbstractFileSystem:
    """An `HfFileSystem` (listings in one paginated request per folder: `max_workers=1`).
    Raises DlError: a token in the storage options (it would be written into run specs and results)."""
    from huggingface_hub import HfFileSystem

    options = dict(storage_options or {})
    if "token" in options:
        raise DlError("do not pass the Hub token as an option (it would be saved with the run's configuration); "
                      "set HF_TOKEN or run `hf auth login`.")
    options.setdefault("max_workers", 1)
    if os.environ.get("HF_ENDPOINT"):  # read now, not only when huggingface_hub was imported
        options.setdefault("endpoint", os.environ["HF_ENDPOINT"].rstrip("/"))
    return HfFileSystem(**options)


def offline_snapshot(repo_id: str, revision: str, sub: str) -> Source:
    """The revision's snapshot in the local Hugging Face cache, as a local source (HF_HUB_OFFLINE).
    Raises DlError: the snapshot is not in the cache."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = snapshot_download(repo_id, repo_type="dataset", revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        raise DlError(f"HF_HUB_OFFLINE is set and dataset {repo_id}@{revision} is not in the local Hugging Face "
                      f"cache ({constants.HF_HUB_CACHE}): download it first (`hf download --repo-type dataset "
                      f"{repo_id} --revision {revision}`) or unset HF_HUB_OFFLINE.") from None
    root = f"{folder}/{sub}" if sub else folder
    return Source(fsspec.filesystem("file"), root, "hub")


def hub_source(root: str, revision: str | None = None, storage_options: dict | None = None, prefetch: bool = True,
               cache_bytes: int | str = DEFAULT_CACHE_BYTES, prefetch_threads: int = 4, block_size: int | str = 1 << 20,
               retry_attempts: int = 6, retry_deadline_s: float = 120.0, cache_dir: str | None = None) -> Source:
    """A dataset repo on the Hugging Face Hub, pinned to one commit.

    Args:
        root: the repo id, `owner/name` (also `hf://datasets/owner/name[@revision][/folder]`).
        revision: branch, tag or commit sha (default: `main`); resolved to the sha once per run.
        storage_options: HfFileSystem options (e.g. `endpoint`; HF_ENDPOINT sets it too). Never a token.
        prefetch: download each admitted episode's files in the background into the local cache.
        cache_bytes: the byte limit of this host's block cache.
        prefetch_threads: download threads per reading process.
        block_size: bytes per request when a file is streamed instead of cached.
        retry_attempts: tries per request (transient errors: resets, timeouts, 429, 5xx).
        retry_deadline_s: stop retrying a request after this many seconds.
        cache_dir: where this host's block cache goes (default: node-local storage, `$SLURM_TMPDIR` or `$TMPDIR`,
            else dl's cache folder: `dl.kits.remote.host_cache.default_base`).

    Raises:
        DlError: a bad repo id, an unknown repo or revision, offline without a cached snapshot.
    """
    from huggingface_hub import constants

    options = remote_options(prefetch, cache_bytes, prefetch_threads, block_size, retry_attempts, retry_deadline_s,
                            cache_dir)
    repo_id, rev, sub = parse_repo(root, revision)
    if constants.is_offline_mode():
        return offline_snapshot(repo_id, rev, sub)
    fs = hub_filesystem(storage_options)
    sha = resolve_revision(repo_id, rev, fs.endpoint, options.retry)
    trust_commit(fs, repo_id, sha)
    path = f"datasets/{repo_id}@{sha}" + (f"/{sub}" if sub else "")
    return HubSource(fs, path, repo_id, sha, options=options)


@hookimpl
def register_sources(register):
    register("hub", hub_source, "a dataset repo on the Hugging Face Hub at one commit; retries, prefetch cache")
