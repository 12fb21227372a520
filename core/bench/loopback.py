"""Serve a local dataset folder on loopback for the remote-source scenarios (`stream_bucket`,
`stream_bucket_2node`, `stream_hub`), so they run without a real endpoint: an S3-protocol server (moto) for
`bucket`, dl's Hub API server for `hub`, both on 127.0.0.1 in the host process while its runs execute
(runs started by the `local` scheduler reach them; a cluster scheduler's nodes would not)."""

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .spec import RunSpec

LOOPBACK_SCENARIOS = ("stream_bucket", "stream_bucket_2node", "stream_hub")


def needs_loopback(spec: RunSpec) -> bool:
    """Whether `spec` is a remote-source scenario given a local dataset folder (or none yet)."""
    return spec.scenario in LOOPBACK_SCENARIOS and spec.root is not None and (Path(spec.root) / "meta").is_dir()


@contextmanager
def serve_on_loopback(spec: RunSpec, say=print) -> Iterator[RunSpec]:
    """While open, serve `spec.root` (a local folder) the way `spec.source` reads it, and yield the spec
    pointing at the server (root and storage options); `spec` as is when `needs_loopback` is False."""
    if not needs_loopback(spec):
        yield spec
        return
    folder = Path(spec.root).resolve()
    options = dict(spec.source_options)
    storage = dict(options.get("storage_options") or {})
    if spec.source == "hub":
        from ..testing.hub_server import HubServer

        with HubServer() as hub:
            repo = f"dl-loopback/{folder.name}"
            hub.add_revision(repo, folder)
            say(f"serving {folder} as Hub dataset {repo} at {hub.endpoint} (loopback)")
            options["storage_options"] = {**storage, "endpoint": hub.endpoint}
            yield dataclasses.replace(spec, root=repo, source_options=options)
        return
    from ..testing.s3_server import S3Server

    with S3Server() as s3:
        url = s3.upload(folder, "dl-loopback", folder.name)
        say(f"serving {folder} as {url} at {s3.endpoint_url} (loopback S3, moto)")
        options["storage_options"] = {**s3.storage_options(), **storage}
        yield dataclasses.replace(spec, root=url, source_options=options)
