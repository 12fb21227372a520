"""dl.kits: the building blocks plugins share, so a third-party source or decoder gets them too.

- `remote`: `RemoteSource` (every remote read retried, counted and prefetched in one wrapper), `retry`
  (transient errors and backoff), `file_cache` (the byte-bounded, reference-counted prefetch cache, in run
  folders named by host and process, on node-local storage by default).
- `video`: `torchcodec_video` (torchcodec as dl's decoders use it) and `decoder_cache` (the LRU of open
  decoders).
- `paths`: where dl keeps what it writes for reuse; `lru_folder`: a folder of derived files shared by
  processes and nodes (atomic writes, least recently used files evicted past a byte limit).

May import: `dl.contracts`, `dl.dataloader.shared_counters` (counters read across DataLoader workers).
"""
