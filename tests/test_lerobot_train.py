"""LeRobot 0.6.1's own `lerobot-train` on dl (`dl train`), in LeRobot's environment (Python 3.12): training, saving
and resuming with the `map` and `pool` loaders (the data stream continues exactly), an elastic resume, a weighted
mixture, two processes under `accelerate launch` reading disjoint shares, image transforms, and samples equal to
LeRobot's own. Datasets are written by LeRobot's own writer (`LeRobotDataset.create`), and open50 is the real one.

.ci/run runs this module in that environment (`scripts/setup_lerobot.sh`, with DL_REQUIRE_LEROBOT=1: no LeRobot is a
failure there); elsewhere it is skipped."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from lerobot_datasets import write_lerobot_dataset

if os.environ.get("DL_REQUIRE_LEROBOT"):  # .ci/run: LeRobot's environment must have it
    import lerobot.scripts.lerobot_train  # noqa: F401
else:
    pytest.importorskip("lerobot.scripts.lerobot_train", reason="needs LeRobot 0.6.1: scripts/setup_lerobot.sh")

pytestmark = pytest.mark.lerobot

RECORD = Path(__file__).with_name("lerobot_record.py")
TINY_ACT = ["--policy.type=act", "--policy.device=cpu", "--policy.push_to_hub=false", "--policy.dim_model=32",
            "--policy.n_heads=2", "--policy.dim_feedforward=64", "--policy.n_encoder_layers=1",
            "--policy.n_decoder_layers=1", "--policy.chunk_size=4", "--policy.n_action_steps=4",
            "--policy.pretrained_backbone_weights=null", "--wandb.enable=false", "--log_freq=100"]
TINY_DIFFUSION = ["--policy.type=diffusion", "--policy.device=cpu", "--policy.push_to_hub=false",
                  "--policy.down_dims=[16,32]", "--policy.horizon=8", "--policy.n_action_steps=4",
                  "--policy.drop_n_last_frames=3", "--policy.diffusion_step_embed_dim=16",
                  "--policy.spatial_softmax_num_keypoints=8", "--policy.pretrained_backbone_weights=null",
                  "--wandb.enable=false", "--log_freq=100"]
POLICIES = {"act": TINY_ACT, "diffusion": TINY_DIFFUSION}


@pytest.fixture(scope="module")
def two_cameras(tmp_path_factory) -> Path:
    return write_lerobot_dataset(tmp_path_factory.mktemp("lerobot") / "two_cameras", [14, 11, 16, 12, 13])


@pytest.fixture(scope="module")
def mixture_members(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("members")
    return (write_lerobot_dataset(folder / "a", [20, 25, 18], cameras=1, seed=1),
            write_lerobot_dataset(folder / "b", [30, 22], cameras=1, seed=2))


def train(out: Path, *args, launcher: list[str] | None = None, timeout: int = 600) -> dict:
    """`dl train ARGS` in a fresh process (or under `launcher`), recording what each step got
    (tests/lerobot_record.py); returns rank 0's record."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    command = [*(launcher or [sys.executable]), str(RECORD), str(out), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return json.loads(out.read_text())


def common(root: Path, output: Path, policy: str = "act", **extra) -> list[str]:
    args = [f"--dataset.repo_id=dl/{root.name}", f"--dataset.root={root}", f"--output_dir={output}", "--seed=3",
            "--num_workers=2", "--batch_size=4", *POLICIES[policy]]
    return args + [f"--{k}={v}" for k, v in extra.items()]


@pytest.mark.parametrize("policy", ["act", "diffusion"])
@pytest.mark.parametrize("loader", ["map", "pool"])
def test_trains_saves_and_resumes_the_data_stream_exactly(two_cameras, tmp_path, loader, policy):
    output = tmp_path / "run"
    whole = train(tmp_path / "whole.json", *common(two_cameras, output, policy, steps=8, save_freq=4),
                  f"--dl.loader={loader}")
    assert len(whole["indices"]) == 8 and all(math.isfinite(x) for x in whole["losses"])
    checkpoint = output / "checkpoints" / "000004"
    assert (checkpoint / "training_state" / "dl_train.json").is_file()
    resumed = train(tmp_path / "resumed.json", "--resume=true",
                    f"--config_path={checkpoint}/pretrained_model/train_config.json", "--steps=8")
    assert resumed["indices"] == whole["indices"][4:], "the resumed run's batches are not the ones the first run read"
    assert all(math.isfinite(x) for x in resumed["losses"])


def test_pool_resumes_elastically_in_another_batch_size(two_cameras, tmp_path):
    frames = 14 + 11 + 16 + 12 + 13
    output = tmp_path / "run"
    first = train(tmp_path / "first.json", *common(two_cameras, output, steps=3, save_freq=3), "--dl.loader=pool")
    read = [i for batch in first["indices"] for i in batch]
    checkpoint = output / "checkpoints" / "000003"
    rest = train(tmp_path / "rest.json", "--resume=true",
                 f"--config_path={checkpoint}/pretrained_model/train_config.json", "--steps=40", "--batch_size=3")
    after = []
    for batch in rest["indices"]:
        if len(read) + len(after) >= frames:
            break
        after.extend(batch)
    assert sorted(read + after) == list(range(frames)), "the epoch's rest was not served exactly once"


def test_a_weighted_mixture_trains_and_holds_its_weights(mixture_members, tmp_path):
    a, b = mixture_members
    record = train(tmp_path / "mix.json", "--dataset.repo_id=dl/mix", f"--output_dir={tmp_path / 'run'}", "--seed=1",
                   "--num_workers=2", "--batch_size=16", "--steps=150", "--save_freq=1000", *TINY_ACT,
                   f"--dl.mix={a}:0.7,{b}:0.3", "--dl.decode_budget=0", timeout=900)
    drawn = np.concatenate([np.asarray(x) for x in record["dataset_index"]])  # epochs end in partial batches
    assert len(drawn) >= 2000
    drawn = drawn[:2000]
    assert abs(float(np.mean(drawn == 0)) - 0.7) <= 0.02
    assert all(math.isfinite(x) for x in record["losses"])


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_two_processes_read_disjoint_shares(two_cameras, tmp_path, loader):
    # accelerate launches CPU processes through torch.distributed.run with --multi_gpu (its --cpu runs one process
    # without MPI); lerobot-train then builds Accelerator(cpu=True): MULTI_CPU, gloo
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes=2",
                "--num_machines=1", "--mixed_precision=no", "--dynamo_backend=no"]
    out = tmp_path / "rank.json"
    rank0 = train(out, *common(two_cameras, tmp_path / "run", steps=4, save_freq=100), f"--dl.loader={loader}",
                  launcher=launcher)
    rank1 = json.loads(out.with_name("rank.rank1.json").read_text())
    assert rank0["world_size"] == rank1["world_size"] == 2
    ours = [i for batch in rank0["indices"] for i in batch]
    theirs = [i for batch in rank1["indices"] for i in batch]
    assert len(ours) == len(theirs) == 16 and not set(ours) & set(theirs)


def _cfg(root: Path, transforms: bool):
    from lerobot.configs.default import DatasetConfig
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.transforms import ImageTransformsConfig

    dataset = DatasetConfig(repo_id=f"dl/{root.name}", root=str(root),
                            image_transforms=ImageTransformsConfig(enable=transforms))
    return TrainPipelineConfig(dataset=dataset, policy=ACTConfig(device="cpu", push_to_hub=False, chunk_size=4,
                                                                 n_action_steps=4), seed=5)


def _first(dataset, count=6) -> list[dict]:
    return [dataset[i] for i in range(count)]


def test_samples_equal_lerobots_and_transforms_are_seeded(two_cameras):
    from lerobot.datasets.factory import make_dataset as lerobot_make_dataset

    from dl.lerobot.datasets import make_train_eval_datasets
    from dl.lerobot.options import TrainOptions

    plain, _ = make_train_eval_datasets(_cfg(two_cameras, False), TrainOptions())
    theirs = lerobot_make_dataset(_cfg(two_cameras, False))
    assert plain.num_frames == theirs.num_frames and plain.num_episodes == theirs.num_episodes
    for ours, ref in zip(_first(plain), _first(theirs), strict=True):
        for key, value in ref.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(ours[key], value), key
            else:
                assert ours[key] == value, key
    for key in ("observation.state", "action"):
        for name in ("mean", "std", "min", "max"):
            assert torch.allclose(plain.meta.stats[key][name], torch.as_tensor(theirs.meta.stats[key][name]).float())

    transformed, _ = make_train_eval_datasets(_cfg(two_cameras, True), TrainOptions())
    torch.manual_seed(0)
    once = _first(transformed)
    torch.manual_seed(0)
    again = _first(transformed)
    cameras = plain.meta.camera_keys
    assert all(torch.equal(x[k], y[k]) for x, y in zip(once, again, strict=True) for k in cameras)
    assert any(not torch.equal(x[k], y[k]) for x, y in zip(once, _first(plain), strict=True) for k in cameras)


def test_open50_trains_with_its_own_key_names(open50, tmp_path):
    selection = [0, 3, 4, 5, 6]
    record = train(tmp_path / "open50.json", "--dataset.repo_id=lingzu/open50", f"--dataset.root={open50}",
                   f"--dataset.episodes={json.dumps(selection)}", f"--output_dir={tmp_path / 'run'}",
                   "--num_workers=2", "--batch_size=4", "--steps=3", "--save_freq=100", *TINY_ACT, "--dl.loader=pool",
                   "--dl.rename=actions=action,state=observation.state,image=observation.images.image")
    assert len(record["indices"]) == 3 and all(math.isfinite(x) for x in record["losses"])
    import pyarrow.dataset as pads

    episodes = pads.dataset(open50 / "data", format="parquet").to_table(columns=["index", "episode_index"])
    allowed = set(np.asarray(episodes["index"])[np.isin(np.asarray(episodes["episode_index"]), selection)].tolist())
    assert {i for batch in record["indices"] for i in batch} <= allowed
