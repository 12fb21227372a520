"""dl.kits.remote: the kit remote sources build on: `source` (`RemoteSource`), `retry`, `file_cache`."""
