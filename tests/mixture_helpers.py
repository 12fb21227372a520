"""Shared helpers of the mixture tests (test_mixture*.py): generated datasets whose keys are named as other robots
name them, and readers of a mixture's batches."""

from collections import Counter

import dl
from dl.testing.renamed import renamed_dataset  # noqa: F401 (the helpers' users take it from here)

A = dict(episodes=5, frames_per_episode=(10, 20), cameras=1, codec="h264", gop=4, episodes_per_file=2)
"""Member a: 5 episodes at 30 fps, one 128x96 camera `observation.images.cam0`."""
B = dict(episodes=3, frames_per_episode=(12, 24), cameras=2, codec="h264", gop=4, episodes_per_file=2, fps=15, seed=1)
"""Member b: 3 episodes at 15 fps, two cameras, renamed (`B_NAMES`) as another lab's robot names them."""
B_NAMES = {"observation.images.cam0": "observation.images.top", "observation.images.cam1": "observation.images.wrist",
           "observation.state": "observation.joints"}
C = dict(episodes=4, frames_per_episode=(8, 16), cameras=1, codec="h264", gop=4, episodes_per_file=4, fps=10, seed=2,
         width=160, height=128)
"""Member c: 4 episodes at 10 fps, one 160x128 camera (another size than a's and b's)."""
TABULAR = dict(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3, row_group_size=8)
"""No video: 7 uneven episodes (order and resume tests run fast)."""
TABULAR_SMALL = dict(episodes=3, frames_per_episode=(4, 9), cameras=0, episodes_per_file=2, seed=3)
"""No video: 3 short episodes (a member that is oversampled)."""
TO_A = {value: key for key, value in B_NAMES.items() if key != "observation.images.cam1"}
"""b's keys renamed back to a's names (its wrist camera has no counterpart in a)."""


def members_of(batches) -> list[tuple[int, int]]:
    """(dataset_index, index) of every sample of `batches`, in order."""
    return [(int(d), int(i)) for batch in batches for d, i in zip(batch["dataset_index"], batch["index"], strict=True)]


def per_member(pairs) -> dict[int, Counter]:
    """How often each member's `index` values came, by member."""
    out: dict[int, Counter] = {}
    for member, index in pairs:
        out.setdefault(member, Counter())[index] += 1
    return out


def every_index(loader) -> list[int]:
    """The global `index` of every frame of a loader's selected episodes."""
    return [i for ep in loader.episodes for i in range(ep.dataset_from_index, ep.dataset_to_index)]


def mixture(roots, loader="map", weights="frames", options=None, **kwargs):
    """A mixture of the datasets at `roots`, each through `loader` (uint8 frames unless told)."""
    config = {"image_dtype": kwargs.pop("image_dtype", "uint8")}
    members = [dl.make_dataset(str(root), loader=loader, loader_options=options, **config) for root in roots]
    return dl.make_mixture(members, weights, **kwargs)
