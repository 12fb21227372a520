"""dl.kits: the building blocks plugins share, so a third-party source or decoder gets them too.

- `remote`: `RemoteSource` (every remote read retried, counted, planned as byte ranges and cached), `retry`
  (transient errors and backoff), `file_plan` / `plans` (which byte ranges an episode needs of a video or data
  file), `prefetch` (which blocks, in which order, and the download threads), `host_cache` (one folder of blocks
  per host), `views` (the file-like views decoders and pyarrow read through).
- `mp4_index`: the sample index of an MP4 video track from its `moov` box (offsets, sizes, presentation
  times, keyframes), for any source that reads byte ranges of videos, its tables parsed by `mp4_boxes`;
  `video_indexes`: each video file's index, parsed once (the one caller of the parser) and carried with its
  source to workers and ranks.
- `video`: `torchcodec_video` (torchcodec as dl's decoders use it) and `decoder_cache` (the LRU of open
  decoders).
- `paths`: where dl keeps what it writes for reuse; `lru_folder`: a folder of derived files shared by
  processes and nodes (atomic writes, least recently used files evicted past a byte limit).
- `process_local`: state each process makes for itself on first use (locks, threads, clients, decoders), so a fork
  never waits on dl and a child never uses its parent's.

May import: `dl.contracts`, `dl.dataloader.shared_counters` (counters read across DataLoader workers).
"""
