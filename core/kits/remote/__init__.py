"""dl.kits.remote: the kit remote sources build on: `source` (`RemoteSource`), `retry`, `file_cache` (ranges
cached per process), `file_plan` and `plans` (byte ranges per episode from file indexes), `views` (file-like
reads of cached ranges)."""
