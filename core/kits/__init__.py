"""dl.kits: the building blocks plugins share, so a third-party source or decoder gets them too.

- `remote`: `RemoteSource` (every remote read retried, counted and prefetched in one wrapper), `retry`
  (transient errors and backoff), `file_cache` (the byte-bounded, reference-counted prefetch cache of byte
  ranges), `file_plan` / `plans` (which byte ranges an episode needs of a video or data file), `views`
  (the file-like views decoders and pyarrow read through).
- `mp4_index`: the sample index of an MP4 video track from its `moov` box (offsets, sizes, presentation
  times, keyframes), for any source that reads byte ranges of videos.
- `video`: `torchcodec_video` (torchcodec as dl's decoders use it) and `decoder_cache` (the LRU of open
  decoders).
- `paths`: where dl keeps what it writes for reuse.

May import: `dl.contracts`, `dl.dataloader.shared_counters` (counters read across DataLoader workers).
"""
