"""Turns mechanisms of the remote sources off in the `dl run` processes of `benchmarks/remote_vs_local.py`, for its
with / without tables (configurations `SOURCE-without-NAME`): that script puts this folder on `PYTHONPATH` and names
the mechanisms in `DL_BENCH_WITHOUT` (comma-separated), and Python imports this module at start-up. Nothing else
imports it; dl itself has no such switches.

- `coalescing`: one download per 128 KiB block instead of adjacent blocks of one depth joined up to 1 MiB
  (`dl.kits.remote.prefetch.RUN_BLOCKS`).
- `read_order`: downloads ordered along each range (its first block first) instead of by the loader's first reads
  (`FileSpan.reads`, their bytes from `dl.kits.remote.plans.FilePlans.ranked`).
- `fills`: a decoder's buffer fill waits for a block not in the cache yet instead of ending there
  (`dl.kits.remote.views.CachedView`'s `fills`).
- `cdn_links`: `hub` sends every range to the file's `resolve` URL and follows its redirect, instead of keeping the
  CDN URL per file (`dl.plugins.remote.links.Links`).
"""

import dataclasses
import os
import threading

WITHOUT = {name for name in os.environ.get("DL_BENCH_WITHOUT", "").split(",") if name}

if WITHOUT:
    from dl.kits.remote import prefetch, views
    from dl.kits.remote.source import RemoteSource
    from dl.plugins.remote import hub, links

    unknown = WITHOUT - {"coalescing", "read_order", "fills", "cdn_links"}
    if unknown:
        raise SystemExit(f"DL_BENCH_WITHOUT names unknown mechanisms: {sorted(unknown)}")
    if "coalescing" in WITHOUT:
        prefetch.RUN_BLOCKS = 1
    if "read_order" in WITHOUT:
        admit = RemoteSource.admit
        RemoteSource.admit = lambda self, key, files, wait=False: admit(
            self, key, [dataclasses.replace(span, reads=()) for span in files], wait)
    if "fills" in WITHOUT:
        views.CachedView.fills = property(lambda self: False, lambda self, value: None)
    if "cdn_links" in WITHOUT:
        hub.LINK_REUSE_S = 0.0  # every range resolved again, and (below) not one file's ranges at a time
        links.Links._lock = lambda self, path: threading.Lock()
