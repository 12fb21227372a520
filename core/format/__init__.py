"""dl.format: the LeRobot v3.0 dataset format, as dl reads it.

- `metadata`: `meta/info.json`, `meta/episodes/`, `meta/tasks.parquet`, `meta/stats.json` and the listing
  of the dataset's files, read once through a `dl.Source` (`DatasetMeta`, `EpisodeMeta`); `episodes`: the
  episodes as columns (`EpisodeColumns`, memory-mappable), with `EpisodeMeta` views built on demand;
  `meta_files`: reading and checking those files; `lerobot_names`: LeRobot's names on dl's loaders.
- `tabular`: an episode's rows from its data parquet file, as numpy arrays.
- `delta`: `delta_timestamps` as frame offsets, with LeRobot's clamping and `_is_pad` masks.
- `samples`: LeRobot-compatible sample dicts from rows and decoded frames (`SampleBuilder`).
- `frame_times`: each video's presentation times from its MP4 index; `timestamp_checks`, `checks`,
  `selection_checks`: which frame a row gets, and what is refused; `feature_selection`: `features=[...]`.

May import: `dl.contracts`, `dl.kits.video_indexes` (a video's frame times, from its container index),
`dl.kits.paths` and `dl.kits.lru_folder` (those frame times kept in dl's cache folder).
"""
