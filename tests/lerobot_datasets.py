"""Datasets written by LeRobot 0.6.1's own writer, for the tests that run in LeRobot's environment
(tests/test_lerobot_train.py, tests/test_peers_lerobot.py)."""

from pathlib import Path

import numpy as np

FPS, SIZE = 30, 64


def write_lerobot_dataset(root: Path, lengths: list[int], cameras: int = 2, seed: int = 0, tasks: int = 2) -> Path:
    """A dataset written by LeRobot 0.6.1's own writer (`LeRobotDataset.create`, `add_frame`, `save_episode`): state
    and action of 4, `cameras` RGB cameras of SIZE x SIZE (LeRobot's default encoding), `tasks` tasks."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    names = {"dtype": "float32", "shape": (4,), "names": [f"j{i}" for i in range(4)]}
    features = {"observation.state": names, "action": dict(names)}
    for c in range(cameras):
        features[f"observation.images.cam{c}"] = {"dtype": "video", "shape": (SIZE, SIZE, 3),
                                                  "names": ["height", "width", "channels"]}
    ds = LeRobotDataset.create(f"dl/{root.name}", FPS, root=root, features=features, use_videos=True)
    rng, index = np.random.default_rng(seed), 0
    for episode, length in enumerate(lengths):
        for _ in range(length):
            frame = {"observation.state": np.full(4, index, np.float32) / 100,
                     "action": rng.normal(size=4).astype(np.float32), "task": f"task {episode % tasks}"}
            for c in range(cameras):
                frame[f"observation.images.cam{c}"] = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
            ds.add_frame(frame)
            index += 1
        ds.save_episode()
    ds.finalize()
    return root
