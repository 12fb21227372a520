"""dl.kits.remote: the kit remote sources build on. `store` (`RemoteStore`: every request retried, counted and
checked; `retry`, `source_counters`), `source` (`RemoteSource`: byte-range plans and the host's block cache on top;
its module docstring follows one byte from the plan to the decoder), `file_plan` and `plans` (byte ranges per
episode from the files' indexes), `span_reads` (where a loader's reads fall in them), `prefetch` (which blocks, in
which order, and the download threads), `host_cache` (one folder of blocks per host), `views` (file-like reads)."""
