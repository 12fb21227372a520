"""Mixtures of datasets that differ: key names, fps, cameras (count and size), episode counts. What a mixture serves,
the values it serves, its windows, its stats, and the errors that say why datasets cannot be mixed."""

import json

import numpy as np
import pytest
import torch
from mixture_helpers import TO_A, members_of

import dl
from dl.contracts.errors import DlError
from dl.testing.synthetic import read_frame_code, state_value

CAM = "observation.images.cam0"


def member(root, **config):
    config.setdefault("image_dtype", "uint8")
    return dl.make_dataset(str(root), **config)


def test_renamed_keys_are_served_under_the_mixtures_names(mixture_roots):
    a, b = member(mixture_roots["a"]), member(mixture_roots["b"])
    with pytest.warns(UserWarning, match=r"left out \(b: observation.images.wrist\)"):
        mix = dl.make_mixture([a, b], rename=[{}, TO_A], names=["a", "b"])
    assert mix.names == ["a", "b"] and mix.video_keys == [CAM]
    batches = list(dl.make_dataloader(mix, batch_size=5, num_workers=2))
    assert {"observation.state", "action", CAM, "dataset_index", "task"} <= set(batches[0])
    assert not {"observation.joints", "observation.images.top", "observation.images.wrist"} & set(batches[0])
    for batch in batches:
        for i, frame in enumerate(batch[CAM]):  # every frame is its own sample's, camera 0 of its dataset
            assert read_frame_code(frame) == (int(batch["index"][i]), 0)
        np.testing.assert_array_equal(batch["observation.state"].numpy(), state_value(batch["index"].numpy(), 6))


def test_samples_equal_each_members_own(mixture_roots):
    """A mixture sample is its member's sample at the same index, renamed, plus dataset_index."""
    a, b = member(mixture_roots["a"]), member(mixture_roots["b"])
    delta = {"action": [-1 / 15, 0.0, 2 / 15], CAM: [-1 / 15, 0.0]}
    mix = dl.make_mixture([{"root": str(mixture_roots["a"]), "name": "a"}, {"root": str(mixture_roots["b"]),
                                                                           "rename": TO_A}],
                          delta_timestamps=delta, image_dtype="uint8", features=["action", CAM])
    own = {0: dl.make_dataset(str(mixture_roots["a"]), delta_timestamps=delta, image_dtype="uint8"),
           1: dl.make_dataset(str(mixture_roots["b"]), image_dtype="uint8",
                              delta_timestamps={"action": delta["action"], "observation.images.top": delta[CAM]})}
    names = {0: {}, 1: {"observation.images.top": CAM}}
    seen = 0
    for sample in mix:
        d = int(sample.pop("dataset_index"))
        expected = own[d][own[d].position_of(int(sample["index"]))]
        expected = {names[d].get(k.removesuffix("_is_pad"), k.removesuffix("_is_pad")) + ("_is_pad" if
                    k.endswith("_is_pad") else ""): v for k, v in expected.items()}
        assert set(sample) == {k for k in expected if k in sample} and "observation.state" not in sample
        for key, value in sample.items():
            same = torch.equal(value, expected[key]) if isinstance(value, torch.Tensor) else value == expected[key]
            assert same, key
        seen += 1
    assert seen == len(a) + len(b)


def test_windows_never_cross_members_or_episodes(mixture_roots):
    """Windows are seconds: 0.2 s is 6 frames of a (30 fps) and 3 of b (15 fps), each inside its own episode."""
    offsets = [-0.2, -2 / 30, 0.0, 0.2]
    mix = dl.make_mixture([{"root": str(mixture_roots["a"])}, {"root": str(mixture_roots["b"]), "rename": TO_A}],
                          delta_timestamps={"observation.state": offsets, CAM: offsets[1:]}, image_dtype="uint8",
                          features=["observation.state", CAM])
    episodes = [{ep.index: ep for ep in m.episodes} for m in mix.members]
    fps = [m.meta.fps for m in mix.members]
    for batch in dl.make_dataloader(mix, batch_size=4, num_workers=2):
        for i in range(len(batch["index"])):
            d, index = int(batch["dataset_index"][i]), int(batch["index"][i])
            ep = episodes[d][int(batch["episode_index"][i])]
            target = index + np.round(np.asarray(offsets) * fps[d]).astype(int)
            rows = np.clip(target, ep.dataset_from_index, ep.dataset_to_index - 1)
            np.testing.assert_array_equal(batch["observation.state"][i, :, 0].numpy(), rows)
            np.testing.assert_array_equal(batch["observation.state_is_pad"][i].numpy(), rows != target)
            assert [read_frame_code(f)[0] for f in batch[CAM][i]] == rows[1:].tolist()


def test_three_members_cameras_of_another_size_need_a_resize(mixture_roots):
    roots = [str(mixture_roots[k]) for k in ("a", "b", "c")]
    specs = [{"root": roots[0], "name": "a"}, {"root": roots[1], "rename": TO_A}, {"root": roots[2], "name": "c"}]
    with pytest.raises(DlError, match=r"camera 'observation.images.cam0' has frames of different sizes .*c: video "
                                      r"\[3, 128, 160\].*resize=\(height, width\)"):
        dl.make_mixture(specs, image_dtype="uint8", features=["observation.state", CAM])
    mix = dl.make_mixture(specs, image_dtype="uint8", features=["observation.state", CAM], resize=(96, 128),
                          weights="episodes")
    assert mix.weights == pytest.approx([5 / 12, 3 / 12, 4 / 12])
    pairs = []
    for batch in dl.make_dataloader(mix, batch_size=8, num_workers=0):
        assert batch[CAM].shape[1:] == (3, 96, 128)
        assert [read_frame_code(f)[0] for f in batch[CAM]] == batch["index"].tolist()
        pairs += members_of([batch])
    assert sorted({d for d, _ in pairs}) == [0, 1, 2]


def test_a_listed_feature_a_member_lacks_names_member_and_key(mixture_roots):
    with pytest.raises(DlError, match=r"member b has no 'observation.state' \(after renaming\); its features: "
                                      r"observation.joints"):
        dl.make_mixture([member(mixture_roots["a"]), member(mixture_roots["b"])], features=["observation.state"],
                        names=["a", "b"])
    with pytest.raises(DlError, match=r"rename 'observation.images.side': not a feature of .*b"):
        dl.make_mixture([member(mixture_roots["a"]), member(mixture_roots["b"])],
                        rename=[{}, {"observation.images.side": CAM}])
    with pytest.raises(DlError, match="bookkeeping keys keep their LeRobot names"):
        dl.make_mixture([member(mixture_roots["a"])], rename=[{"index": "idx"}])


def test_windows_of_different_lengths_are_refused(mixture_roots):
    a = member(mixture_roots["a"], delta_timestamps={"action": [0.0, 1 / 30]})
    b = member(mixture_roots["b"], delta_timestamps={"action": [0.0]})
    with pytest.raises(DlError, match=r"key 'action' differs between members \(a: float32 \[2, 6\], b: float32 "
                                      r"\[1, 6\]\)"):
        dl.make_mixture([a, b], features=["action"], names=["a", "b"])


def test_a_spec_members_error_names_the_member(mixture_roots):
    with pytest.raises(DlError, match=r"mixture member b: delta_timestamps\['action'\] offsets \[0.1\] are not "
                                      r"multiples of 1/fps"):
        dl.make_mixture([{"root": str(mixture_roots["a"])}, {"root": str(mixture_roots["b"])}],
                        delta_timestamps={"action": [0.0, 0.1]})


def test_weights_and_members_that_cannot_be_mixed(mixture_roots):
    a = member(mixture_roots["a"])
    with pytest.raises(DlError, match="mixture weights must be positive numbers; got a=0.0"):
        dl.make_mixture([a, member(mixture_roots["c"])], weights=[0, 1], features=["action"], names=["a", "c"])
    with pytest.raises(DlError, match="give one weight per member"):
        dl.make_mixture([a], weights=[0.5, 0.5])
    with pytest.raises(DlError, match="frames as float32 and uint8"):
        dl.make_mixture([a, member(mixture_roots["c"], image_dtype="float32")])
    with pytest.raises(DlError, match=r"member tabular: its consumers read .*build it without drop_last"):
        next(iter(dl.make_mixture([a, dl.make_dataset(str(mixture_roots["tabular"]), loader="pool", image_dtype="uint8",
                                                      loader_options={"drop_last": True})], features=["action"],
                                  names=["a", "tabular"], world_size=2, rank=0)))


def test_per_member_stats_and_their_aggregate(mixture_roots):
    a, b = member(mixture_roots["a"]), member(mixture_roots["b"])
    mix = dl.make_mixture([a, b], rename=[{}, TO_A], weights=[0.25, 0.75], features=["observation.state", "action"],
                          names=["a", "b"])
    raw = [json.loads((mixture_roots[k] / "meta/stats.json").read_text()) for k in ("a", "b")]
    assert mix.stats["a"] == raw[0]
    assert mix.stats["b"]["observation.state"] == raw[1]["observation.joints"]
    assert "observation.joints" not in mix.stats["b"]
    values = [state_value(np.arange(len(m)), 6) for m in (a, b)]
    together = np.concatenate(values)
    merged = mix.stats.aggregated()["observation.state"]
    np.testing.assert_allclose(merged["mean"], together.mean(0), rtol=1e-6)
    np.testing.assert_allclose(merged["std"], together.std(0), rtol=1e-6)
    np.testing.assert_allclose(merged["min"], together.min(0))
    assert merged["count"] == [len(together)]
    weighted = mix.stats.aggregated(weighted=True)["observation.state"]
    np.testing.assert_allclose(weighted["mean"], 0.25 * values[0].mean(0) + 0.75 * values[1].mean(0), rtol=1e-6)


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_image_features_are_cameras_of_the_mixture(dataset_factory, loader):
    """Cameras stored as images in the data parquet (dtype "image") are mixture cameras like video ones."""
    roots = [dataset_factory(episodes=3, frames_per_episode=(6, 10), cameras=2, image_cameras=(1,), codec="h264",
                             gop=4, seed=seed) for seed in (0, 1)]
    mix = dl.make_mixture([member(root, loader=loader) for root in roots])
    assert mix.video_keys == [CAM, "observation.images.cam1"]
    served = 0
    for batch in dl.make_dataloader(mix, batch_size=4, num_workers=0):
        for i, index in enumerate(batch["index"].tolist()):
            assert [read_frame_code(batch[key][i]) for key in mix.video_keys] == [(index, 0), (index, 1)]
            served += 1
    assert served == sum(len(member(root)) for root in roots)
