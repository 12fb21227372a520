"""Serve a local dataset folder on loopback, as an S3 bucket (moto) and as a Hub dataset repo (dl's Hub API
server), optionally behind the fault proxy (latency, bandwidth cap), and print the `dl run` commands that
read it through the `bucket` and `hub` sources. Serves until interrupted (Ctrl-C).

    python -m dl.testing.serve path/to/dataset [--latency-ms 20 --mbit 80]
"""

import argparse
import shlex
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

from .fault_proxy import FaultProxy
from .hub_server import HubServer
from .s3_server import S3Server


def complete_episodes(folder: Path) -> str | None:
    """`--episodes`' value selecting the episodes of the dataset at `folder` whose files all exist, or None when
    every episode's do."""
    from ..contracts.errors import format_indices
    from ..host.assembly import open_dataset

    meta = open_dataset(str(folder))
    complete = meta.complete_episodes()
    return None if len(complete) == len(meta.columns) else format_indices(complete)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dl.testing.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a LeRobot v3.0 dataset folder")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every request [0]")
    parser.add_argument("--mbit", type=float, default=None, help="bandwidth cap in Mbit/s [none]")
    args = parser.parse_args(argv)
    from ..contracts.errors import show_warnings_as_lines

    show_warnings_as_lines()
    folder = args.dataset.resolve()
    if not (folder / "meta" / "info.json").is_file():
        parser.error(f"{folder} has no meta/info.json: give a LeRobot v3.0 dataset folder")
    with ExitStack() as stack:
        s3, hub = stack.enter_context(S3Server()), stack.enter_context(HubServer(page_size=1000))
        url = s3.upload(folder, "dl-loopback", folder.name)
        repo = f"dl-loopback/{folder.name}"
        hub.add_revision(repo, folder)
        s3_url, hub_url = s3.endpoint_url, hub.endpoint
        if args.latency_ms or args.mbit:
            network = {"latency_s": args.latency_ms / 1e3, "bandwidth_bps": args.mbit * 1e6 if args.mbit else None}
            s3_url = stack.enter_context(FaultProxy(s3.endpoint_url, **network)).endpoint_url
            hub_url = stack.enter_context(FaultProxy(hub.endpoint, **network)).endpoint_url
        bucket = ["dl", "run", "--source", "bucket", "--root", url, "--storage-option", f"endpoint_url={s3_url}",
                  "--storage-option", "key=testing", "--storage-option", "secret=testing", "--loader", "pool"]
        hub_cmd = ["dl", "run", "--source", "hub", "--repo-id", repo, "--revision", "main", "--loader", "pool"]
        complete = complete_episodes(folder)
        if complete is not None:  # some episodes' files are missing: the commands select the others
            bucket, hub_cmd = bucket + ["--episodes", complete], hub_cmd + ["--episodes", complete]
        print(f"serving {folder}\n  S3 (moto):   {url} at {s3_url}\n  Hub API:     {repo} at {hub_url}\n"
              f"read it with:\n  {shlex.join(bucket)}\n  HF_ENDPOINT={hub_url} {shlex.join(hub_cmd)}\n"
              "Ctrl-C stops the servers.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
