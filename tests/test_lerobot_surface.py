"""What lerobot-train reads of a dataset, served by dl without LeRobot installed: `LeRobotMeta`, the views'
LeRobot attributes and index mapping, LeRobot's names on dl's own datasets, image transforms, `dl train`'s options
and its one-line errors. (With LeRobot 0.6.1 itself: tests/test_lerobot_train.py.)"""

import importlib.util
import json

import numpy as np
import pytest
import torch
from cli_helpers import invoke

import dl
from dl.contracts.errors import DlError
from dl.format.metadata import stats_tensors
from dl.lerobot.meta import IMAGENET_STATS, LeRobotMeta
from dl.lerobot.options import TrainOptions, save_state, saved_state, split_arguments
from dl.lerobot.views import AbsoluteToRelative, LeRobotMapView, renamed
from dl.testing.synthetic import camera_key

RENAME = {"observation.state": "observation.joints", camera_key(0): "observation.images.front"}


def test_meta_has_lerobots_names_and_meanings(small_dataset):
    ds = dl.make_dataset(str(small_dataset), episodes=[1, 4])
    stats_doc = json.loads((small_dataset / "meta" / "stats.json").read_text())
    meta = LeRobotMeta.of_dataset(ds.meta, "local/small", small_dataset, RENAME)
    assert meta.fps == ds.meta.fps and meta.total_frames == ds.meta.total_frames and meta.total_episodes == 6
    assert "observation.joints" in meta.features and "observation.state" not in meta.features
    assert meta.camera_keys == ["observation.images.front", camera_key(1)] == meta.video_keys
    assert meta.features["observation.joints"] == ds.meta.features["observation.state"]
    state = meta.stats["observation.joints"]
    assert state["mean"].dtype == torch.float32
    np.testing.assert_allclose(state["mean"].numpy(), np.asarray(stats_doc["observation.state"]["mean"], np.float32))
    columns = ds.meta.columns
    for name in ("dataset_from_index", "dataset_to_index", "length"):
        assert meta.episodes[name][columns.index].tolist() == getattr(columns, name).tolist()
    assert meta.episodes["tasks"][4] == list(ds.meta.episodes[4].tasks)
    assert meta.tasks.loc[ds.meta.tasks[0], "task_index"] == 0
    assert not meta.has_language_columns and meta.depth_keys == []


def test_stats_tensors_keep_counts_as_integers():
    out = stats_tensors({"a": {"mean": [0.5, 1.5], "count": [10]}})
    assert out["a"]["mean"].dtype == torch.float32 and out["a"]["count"].dtype == torch.int64
    assert out["a"]["count"].tolist() == [10]


def test_imagenet_stats_fill_a_camera_stats_json_lacks_in_one_warning(small_dataset):
    ds = dl.make_dataset(str(small_dataset))
    meta = LeRobotMeta.of_dataset(ds.meta, "local/small", small_dataset)
    del meta.stats[camera_key(1)]
    with pytest.warns(dl.DlWarning, match=f"no stats for camera.*{camera_key(1)}.*ImageNet"):
        meta.use_imagenet_stats()
    for key in meta.camera_keys:
        assert torch.equal(meta.stats[key]["mean"], torch.tensor(IMAGENET_STATS["mean"], dtype=torch.float32))
        assert meta.stats[key]["std"].shape == (3, 1, 1)


def test_map_view_is_lerobots_relative_index(small_dataset):
    ds = dl.make_dataset(str(small_dataset), episodes=[0, 2, 5])
    view = LeRobotMapView(ds, LeRobotMeta.of_dataset(ds.meta, "local/small", small_dataset), RENAME)
    assert view.episodes == [0, 2, 5] and view.num_episodes == 3
    assert view.num_frames == len(view) == sum(ds.meta.episodes[e].length for e in (0, 2, 5))
    mapping = view.absolute_to_relative_idx
    assert len(mapping) == len(view)
    for absolute in list(mapping)[::7]:
        position = mapping[absolute]
        assert position == ds.position_of(absolute)
        assert int(view[position]["index"]) == absolute
    first_of_1 = ds.meta.episodes[1].dataset_from_index
    with pytest.raises(KeyError):
        mapping[first_of_1]  # episode 1 is not selected
    sample = view[0]
    assert "observation.joints" in sample and "observation.images.front" in sample and camera_key(0) not in sample


def test_absolute_to_relative_follows_the_index_order_not_the_selection_order():
    mapping = AbsoluteToRelative(np.array([100, 0, 50]), np.array([3, 2, 4]))
    assert [mapping[i] for i in (100, 101, 102, 0, 1, 50, 53)] == [0, 1, 2, 3, 4, 5, 8]
    assert list(mapping) == [0, 1, 50, 51, 52, 53, 100, 101, 102]
    for missing in (2, 54, 103, -1):
        with pytest.raises(KeyError):
            mapping[missing]


def test_renamed_moves_pads_with_their_key():
    batch = {"action": 1, "action_is_pad": 2, "other": 3}
    assert renamed(batch, {"action": "act"}) == {"act": 1, "act_is_pad": 2, "other": 3}
    assert renamed(batch, {}) is batch


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_loaders_carry_lerobots_names_for_the_selection(small_dataset, loader):
    ds = dl.make_dataset(str(small_dataset), loader=loader, episodes=[1, 3])
    assert ds.num_episodes == 2 and ds.num_frames == ds.meta.episodes[1].length + ds.meta.episodes[3].length
    assert ds.num_frames < ds.meta.total_frames
    assert ds.fps == ds.meta.fps and ds.camera_keys == ds.meta.camera_keys and set(ds.features) <= set(ds.meta.features)
    assert str(ds.root) == str(small_dataset) and ds.repo_id == small_dataset.name


def test_lerobots_own_arguments_name_what_dl_takes(small_dataset):
    with pytest.raises(DlError, match=r'video_backend= \(use decoder="cpu"'):
        dl.make_dataset(str(small_dataset), video_backend="pyav")
    with pytest.raises(DlError, match=r"make_dataset does not take bogus="):
        dl.make_dataset(str(small_dataset), bogus=1)


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_image_transforms_apply_to_cameras_as_served(small_dataset, loader):
    plain = dl.make_dataset(str(small_dataset), loader=loader, image_dtype="uint8", episodes=[0])
    flipped = dl.make_dataset(str(small_dataset), loader=loader, image_dtype="uint8", episodes=[0])
    flipped.set_image_transforms(lambda frames: frames.flip(-1))
    before = plain[3] if loader == "map" else next(iter(plain))
    after = flipped[3] if loader == "map" else next(iter(flipped))
    for key in plain.camera_keys:
        assert torch.equal(after[key], before[key].flip(-1)) and after[key].dtype == torch.uint8
    assert torch.equal(after["observation.state"], before["observation.state"])


def test_float_frames_reach_transforms_as_float_even_through_workers(small_dataset):
    ds = dl.make_dataset(str(small_dataset), episodes=[0])
    seen = []
    ds.set_image_transforms(lambda frames: seen.append(frames.dtype) or frames)
    ds.emit_uint8_frames(True)  # what a DataLoader with workers asks: ignored while transforms are set
    ds[0]
    assert set(seen) == {torch.float32}


def test_split_arguments_takes_dls_and_passes_the_rest():
    given, rest = split_arguments(["--dataset.root=/x", "--dl.loader=pool", "--dl.rename", "a=b,c=d",
                                   "--dl.mix=/p:0.7", "--dl.mix", "s3://b/q:0.3", "--dl.source_option=anon=true",
                                   "--dl.episode_pool_size=4", "--steps=3"])
    assert rest == ["--dataset.root=/x", "--steps=3"]
    assert given == {"loader": "pool", "rename": {"a": "b", "c": "d"}, "mix": [("/p", 0.7), ("s3://b/q", 0.3)],
                     "source_options": {"anon": True}, "episode_pool_size": 4}
    assert TrainOptions(**given).streams


@pytest.mark.parametrize("argv, words", [
    (["--dl.lodr=pool"], "unknown option --dl.lodr: dl train takes"),
    (["--dl.rename=ab"], "OLD=NEW"),
    (["--dl.mix=/p:heavy"], "ROOT:WEIGHT"),
    (["--dl.episode_pool_size=many"], "whole number"),
    (["--dl.loader"], "needs a value"),
])
def test_bad_dl_options_say_what_to_give(argv, words):
    with pytest.raises(DlError, match=words):
        TrainOptions(**split_arguments(argv)[0])


def test_a_mixture_streams_and_a_bad_loader_is_refused():
    assert TrainOptions(mix=[("/a", 1.0)]).loader == "pool"
    with pytest.raises(DlError, match="--dl.loader must be one of map, pool"):
        TrainOptions(loader="lance")


def test_checkpoint_state_round_trips_and_given_options_win(tmp_path):
    save_state(tmp_path, TrainOptions(loader="pool", rename={"a": "b"}, mix=[("/a", 0.5)]), {"epoch": 2})
    saved = saved_state(tmp_path)
    assert saved["loader_state"] == {"epoch": 2}
    again = TrainOptions.from_json(saved["options"], {"decoder": "nvdec"})
    assert again.loader == "pool" and again.rename == {"a": "b"} and again.mix == [("/a", 0.5)]
    assert again.decoder == "nvdec"
    assert saved_state(tmp_path / "none") == {}


@pytest.mark.skipif(importlib.util.find_spec("lerobot") is not None, reason="LeRobot is installed here")
def test_dl_train_without_lerobot_names_the_extra():
    result = invoke("train", "--dataset.repo_id=x", "--dl.loader=pool")
    assert result.exit_code == 2
    assert "pip install 'dl[lerobot]'" in result.output and len(result.output.strip().splitlines()) == 1


def test_dl_train_help_lists_dls_options():
    result = invoke("train", "--help")
    assert result.exit_code == 0
    for option in ("--dl.loader", "--dl.mix", "--dl.rename", "--dl.decode_budget", "--resume=true"):
        assert option in result.output
