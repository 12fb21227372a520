"""dl.kits.remote: the kit remote sources build on: `store` (`RemoteStore`: requests retried, counted and checked),
`source` (`RemoteSource`: byte ranges and prefetch on top), `source_counters`, `retry`, `file_cache` (ranges cached
per process), `file_ranges`, `peer_copies` (ranges other processes on the host hold), `run_folders`, `file_plan`
and `plans` (byte ranges per episode from file indexes), `piece_order`, `span_reads`, `views` (file-like reads of
cached ranges), `fork_guard`."""
