"""LeRobot 0.6's language columns (`language_persistent`, `language_events`) served as LeRobot 0.6.1 serves them, a list
of message dicts per frame, in `map` and `pool`, kept as lists per batch by dl's DataLoader (with workers), the
`tools` list through the metadata, and in a mixture whose other member has none (empty lists). Equality with LeRobot
0.6.1 itself, on a dataset its annotation writer wrote, is benchmarks/lerobot06_cases.py's."""

import numpy as np
import pyarrow as pa
import pytest
import torch
from remote_helpers import hub, loopback_hub_source, publish  # noqa: F401 (fixtures)

import dl
from dl.format.columns import LanguageColumn
from dl.format.metadata import DatasetMeta
from dl.host.assembly import build_loader
from dl.testing.synthetic import SyntheticConfig, language_messages

CASE = dict(episodes=4, frames_per_episode=(12, 20), cameras=1, width=64, height=64, episodes_per_file=2,
            language_columns=True)
LANGUAGE = ("language_persistent", "language_events")


def _expected(index: int) -> tuple[list, list]:
    from conftest import SMALL

    config = SyntheticConfig(**{**SMALL.__dict__, **CASE})
    starts = np.concatenate([[0], np.cumsum(config.episode_lengths())])
    episode = int(np.searchsorted(starts, index, side="right")) - 1
    return language_messages(config, episode, index - int(starts[episode]))


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_every_frame_carries_its_messages_through_a_dataloader_with_workers(dataset_factory, loader):
    root = dataset_factory(**CASE)
    dataset = dl.make_dataset(str(root), loader=loader)
    assert dataset.meta.left_out == {} and [t["function"]["name"] for t in dataset.meta.tools] == ["say"]
    seen = 0
    for batch in dl.make_dataloader(dataset, batch_size=5, num_workers=2):
        for key in LANGUAGE:
            assert isinstance(batch[key], list) and len(batch[key]) == len(batch["index"])
        for b, index in enumerate(batch["index"].tolist()):
            assert (batch["language_persistent"][b], batch["language_events"][b]) == _expected(index)
            seen += 1
    assert seen == dataset.meta.total_frames


def test_messages_are_typed_as_lerobots_datasets_features_give_them():
    """float32 timestamps (LeRobot's feature), JSON tool calls decoded, whatever types the file's writer inferred."""
    inferred = pa.array([[{"role": "user", "content": "hi", "style": "subtask", "timestamp": 0.1, "camera": None,
                           "tool_calls": None}],
                         [{"role": "assistant", "content": None, "style": None, "timestamp": 0.2, "camera": None,
                           "tool_calls": ['{"type": "function", "function": {"name": "say"}}']}]])
    column = LanguageColumn.of(inferred, "language_persistent")
    assert column[0][0]["timestamp"] == float(np.float32(0.1)) != 0.1
    assert column[1][0]["tool_calls"] == [{"type": "function", "function": {"name": "say"}}]
    assert LanguageColumn.of(pa.array([[], []]), "language_events")[np.array([0, 1])] == [[], []]


def test_a_mixture_member_without_language_serves_empty_lists(dataset_factory):
    annotated = dl.make_dataset(str(dataset_factory(**CASE)))
    plain = dl.make_dataset(str(dataset_factory(**{**CASE, "language_columns": False})))
    mixture = dl.make_mixture([annotated, plain], seed=1)
    by_member = {0: [], 1: []}
    for sample in mixture:
        by_member[int(sample["dataset_index"])].append(sample)
    assert by_member[0] and by_member[1]
    assert all(s["language_persistent"] == [] and s["language_events"] == [] for s in by_member[1])
    assert all(s["language_persistent"] == _expected(int(s["index"]))[0] for s in by_member[0])


def test_a_remote_source_serves_the_same_language_and_depth(hub, dataset_factory):  # noqa: F811
    root = dataset_factory(**{**CASE, "depth_camera": True, "gop": 2})
    meta = DatasetMeta.load(loopback_hub_source(hub, publish(hub, root)))
    remote = build_loader(meta, "pool", "cpu", config=dl.LoaderConfig()).loader
    local = dl.make_dataset(str(root))
    seen = 0
    for batch in dl.make_dataloader(remote, batch_size=6, num_workers=2):
        for b, index in enumerate(batch["index"].tolist()):
            want = local[index]
            assert batch["language_persistent"][b] == want["language_persistent"]
            assert batch["language_events"][b] == want["language_events"]
            assert torch.equal(batch["observation.images.depth"][b], want["observation.images.depth"])
            seen += 1
    assert seen == meta.total_frames
