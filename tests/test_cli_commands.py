"""End-to-end tests of `dl info`, `dl synthetic-dataset` and the help texts."""

import json
import subprocess

from cli_helpers import (
    DL,
    env_with,
    invoke,
)
from click.testing import CliRunner

from dl.cli.main import cli
from dl.testing.synthetic import camera_key

# ------------------------------------------------------------------------------------- dl info


def test_info_summary(small_dataset):
    result = invoke("info", small_dataset)
    assert result.exit_code == 0, result.output
    text = result.output
    from dl.format.metadata import DatasetMeta
    from dl.plugins.local_source import local_source

    total = DatasetMeta.load(local_source(str(small_dataset))).total_frames
    assert "6 episodes" in text and f"{total} frames at 30 fps" in text and "2 task(s)" in text
    assert "v3.0" in text and "dl_synthetic" in text
    for key in (camera_key(0), camera_key(1)):
        assert key in text
    assert text.count("h264") >= 4  # info.json and stream, for both cameras
    assert "128x96" in text and "2/2" in text
    assert "all data and video files present" in text
    assert "disagrees" not in text and "missing" not in text


def test_info_lists_missing_files(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    missing = f"videos/{camera_key(0)}/chunk-000/file-000.mp4"
    (root / missing).unlink()
    result = invoke("info", root)
    assert result.exit_code == 0, result.output
    assert "1 missing file(s)" in result.output and missing in result.output
    assert "--episodes 3-5" in result.output and "1/2" in result.output


def test_info_on_non_dataset(tmp_path):
    result = invoke("info", tmp_path)
    assert result.exit_code == 2 and "meta/info.json" in result.output


def test_info_and_validate_name_no_option_they_do_not_take(tmp_path):
    """Their dataset is an argument: an error names the dataset, not `--root`."""
    for command in ("info", "validate"):
        for given, says in ((tmp_path / "nope", "no such folder"), (tmp_path, "has no meta/info.json")):
            result = invoke(command, given)
            assert result.exit_code == 2 and says in result.output and str(given) in result.output
            assert "--root" not in result.output, result.output


def test_info_open50(open50):
    result = invoke("info", open50)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "50 episodes" in text and "20814 frames at 30 fps" in text and "1 task(s)" in text
    assert "7 missing file(s)" in text and "1-2,7,9,25,33-34" in text
    for e in (1, 2, 7, 9, 25, 33, 34):
        assert f"videos/image/chunk-000/file-{e:03d}.mp4" in text
    assert "--episodes 0,3-6,8,10-24,26-32,35-49" in text
    assert "h264" in text and "mpeg4" in text and "info.json disagrees" in text
    assert "640x480" in text and "43/50" in text


def test_info_codec_alias_is_not_a_disagreement(dataset_factory):
    root = dataset_factory(episodes=1, frames_per_episode=(6, 6), cameras=1, info_codec="libx264")
    result = invoke("info", root)
    assert result.exit_code == 0, result.output
    assert "libx264" in result.output and "disagrees" not in result.output


# ------------------------------------------------------------------------------ dl synthetic-dataset


def test_synthetic_dataset_then_info(tmp_path):
    target = tmp_path / "x"
    result = invoke("synthetic-dataset", target, "--episodes", "2", "--frames", "10", "--cameras", "1", "--codec",
                    "h264")
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote 2 episodes to {target}\n"  # no empty line before it
    info = json.loads((target / "meta/info.json").read_text())
    assert info["total_episodes"] == 2 and info["total_frames"] == 20
    assert [k for k, f in info["features"].items() if f["dtype"] == "video"] == [camera_key(0)]
    result = invoke("info", target)
    assert result.exit_code == 0, result.output
    assert "2 episodes, 20 frames at 30 fps" in result.output
    assert camera_key(0) in result.output and camera_key(1) not in result.output
    assert "h264" in result.output and "all data and video files present" in result.output
    # the target now exists: writing again refuses
    again = CliRunner().invoke(cli, ["synthetic-dataset", str(target), "--episodes", "1"])
    assert again.exit_code != 0


def test_synthetic_dataset_bad_config(tmp_path):
    result = invoke("synthetic-dataset", tmp_path / "y", "--size", "100x64")
    assert result.exit_code == 2 and "width" in result.output
    assert not (tmp_path / "y").exists()


# ------------------------------------------------------------------------------------------- help


def test_help_texts():
    top = invoke("--help")
    assert top.exit_code == 0
    for command in ("run", "info", "plugins", "synthetic-dataset"):
        assert command in top.output
    words = " ".join(top.output.split())
    assert "with no --root: on an embedded synthetic dataset dl generates once" in words
    run_help = invoke("run", "--help")
    assert run_help.exit_code == 0
    text = run_help.output
    assert "Scenarios (--scenario):" in text
    lines = [line.strip() for line in text.splitlines()]
    for line in ("mmap_local: map loader over a local root, memory-mapped Arrow rows, CPU decode, 2 workers",
                 "mmap_local_maxworkers: mmap_local with one DataLoader worker per CPU core"):
        assert line in lines
    for option in ("--mode", "--num-workers", "--episodes", "--root", "--out-dir", "sarm", "chunk"):
        assert option in text


def test_run_help_examples_are_not_rewrapped():
    text = invoke("run", "--help").output
    assert "\b" not in text  # click's no-rewrap marker must not leak into the output
    lines = [line.strip() for line in text.splitlines()]
    assert "Examples:" in lines
    assert "dl run --root DATASET --episodes 0,3-6 --mode single,sarm --num-workers 0,2" in lines


def test_dl_executable_help_and_version():
    proc = subprocess.run([str(DL), "--help"], capture_output=True, text=True, timeout=120, env=env_with())
    assert proc.returncode == 0 and "dl run" in proc.stdout
    proc = subprocess.run([str(DL), "--version"], capture_output=True, text=True, timeout=120, env=env_with())
    assert proc.returncode == 0 and "dl" in proc.stdout and "0.1.0" in proc.stdout
