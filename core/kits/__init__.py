"""dl.kits: the building blocks plugins share, so a third-party source or decoder gets them too.

- `remote`: `RemoteSource` (every remote read retried, counted and prefetched in one wrapper), `retry`
  (transient errors and backoff), `file_cache` (the byte-bounded, reference-counted prefetch cache).
- `video`: `torchcodec_video` (torchcodec as dl's decoders use it) and `decoder_cache` (the LRU of open
  decoders).
- `paths`: where dl keeps what it writes for reuse.

May import: `dl.contracts`, `dl.dataloader.shared_counters` (counters read across DataLoader workers).
"""
