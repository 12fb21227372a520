"""dl.kits.remote: the kit remote sources build on. `store` (`RemoteStore`: every request retried, counted, checked;
`retry`, `source_counters`), `source` (`RemoteSource`: plans and the host's block cache on top, one byte's way in
order), `file_plan` and `plans` (spans' and reads' byte ranges from the files' indexes), `prefetch`
(which blocks, in which order; download threads), `host_cache`, `views`."""
