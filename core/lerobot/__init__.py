"""dl.lerobot: LeRobot's own `lerobot-train` on dl's loaders (`dl train`).

- `meta`: `LeRobotMeta`, the metadata surface LeRobot's training, policies and processors read
  (`LeRobotDatasetMetadata`'s names and meanings), over a dl loader or a mixture.
- `views`: the datasets lerobot-train is handed: `LeRobotMapView` (map-style, for LeRobot's `EpisodeAwareSampler`)
  and `LeRobotStreamView` (the `pool` loader or a mixture, each rank reading its own share).
- `options`: `TrainOptions`, the `--dl.*` arguments of `dl train`, and where a checkpoint keeps them.
- `datasets`: `make_train_eval_datasets`, dl's replacement for LeRobot's factory of the same name.
- `session`: `TrainSession`, the seams `dl train` sets in LeRobot's training module (the dataset factory, the
  Accelerator's DataLoader preparation, the checkpoint's loader state), and `run`.

LeRobot (0.6.1, `pip install 'dl[lerobot]'`, Python >= 3.12) is imported only inside functions, never at import
time, and is used as released: dl sets module attributes of `lerobot.scripts.lerobot_train` in the `dl train`
process and patches no file.

May import: `dl.contracts`, `dl.format`, `dl.dataloader`, `dl.host`, `dl.mixture`.
"""
