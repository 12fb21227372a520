"""`dl transcode` end to end with real FFmpeg: the new dataset serves every frame of the old one at the same rows
(each synthetic frame draws its global index), with the new codec and GOP in its files and info.json and
everything else copied; from any source (a loopback S3 server); interrupted by a real SIGINT, it leaves no
complete-looking dataset and no FFmpeg behind, and the same command finishes it without encoding the verified
files again; the PSNR threshold refuses, and a lower one accepts without re-encoding; missing videos are refused
or, when allowed, left missing."""

import json
import os
import signal
import subprocess
import time

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest
from cli_helpers import DL, dl_subprocess, env_with
from remote_helpers import s3, upload  # noqa: F401 (fixture)

import dl
from dl.testing.synthetic import read_frame_code
from dl.transcode.ffmpeg import Processes, frames_of
from dl.transcode.run import RECORD
from dl.transcode.state import WORK

AV1 = {"codec": "av1", "gop": 2, "episodes": 5, "frames_per_episode": (20, 40), "episodes_per_file": 2}


def transcode(src, dst, *args, cache_dir, timeout=300):
    return dl_subprocess("transcode", src, dst, *args, cache_dir=cache_dir, timeout=timeout)


def assert_same_frames_at_every_row(root) -> None:
    dataset = dl.make_dataset(str(root), image_dtype="uint8")
    for i in range(len(dataset)):
        sample = dataset[i]
        for camera, key in enumerate(dataset.meta.video_keys):
            assert read_frame_code(sample[key]) == (int(sample["index"]), camera), (i, key)


def video_files(root) -> list:
    return sorted(p.relative_to(root) for p in root.joinpath("videos").rglob("*.mp4"))


def test_the_new_dataset_serves_the_same_frames_with_the_new_codec(dataset_factory, tmp_path):
    src = dataset_factory(**AV1)
    dst = tmp_path / "h264"
    done = transcode(src, dst, "--codec", "h264", "--gop", "3", cache_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "video files" in done.stdout and f"dl run --root {dst}" in done.stdout
    assert_same_frames_at_every_row(dst)
    old_info, info = (json.loads((r / "meta" / "info.json").read_text()) for r in (src, dst))
    for key, feature in info["features"].items():
        if feature["dtype"] == "video":
            assert {k: feature["info"][k] for k in ("video.codec", "video.g", "video.pix_fmt")} == {
                "video.codec": "h264", "video.g": 3, "video.pix_fmt": "yuv420p"}
            feature["info"] = old_info["features"][key]["info"]
    assert info == old_info, "only the cameras' codec fields change"
    for rel in ("meta/tasks.parquet", "meta/stats.json", *(p.relative_to(src) for p in src.glob("data/**/*.parquet"))):
        assert (dst / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert video_files(dst) == video_files(src)
    processes = Processes()
    for rel in video_files(dst):
        found = frames_of(processes, "ffprobe", str(dst / rel))
        assert found.keyframes.tolist() == list(range(0, len(found.pts_s), 3)), rel
    episodes = [pq.read_table(r / "meta/episodes/chunk-000/file-000.parquet").to_pandas() for r in (src, dst)]
    stamps = [c for c in episodes[0].columns if c.endswith("_timestamp")]
    assert episodes[0].drop(columns=stamps).equals(episodes[1].drop(columns=stamps))
    np.testing.assert_allclose(episodes[1][stamps].to_numpy(), episodes[0][stamps].to_numpy(), atol=1e-4)
    record = json.loads((dst / RECORD).read_text())
    assert record["options"]["codec"] == "h264" and len(record["files"]) == len(video_files(src))
    assert all(f["psnr_db"] > 30 and f["gop"] == 3 for f in record["files"].values())
    assert not (dst / WORK).exists()


@pytest.mark.slow
@pytest.mark.parametrize("codec, args", [("hevc", ["--gop", "12"]), ("h264", ["--gop", "12", "--bframes", "3"]),
                                         ("av1", ["--gop", "4", "--pix-fmt", "yuv420p10le"])])
def test_every_codec_and_b_frames_keep_the_frames_at_their_rows(dataset_factory, tmp_path, codec, args):
    dst = tmp_path / codec
    done = transcode(dataset_factory(**AV1), dst, "--codec", codec, *args, cache_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_frames_at_every_row(dst)


@pytest.mark.slow  # starts `dl` processes
def test_a_dataset_on_an_s3_server_transcodes_to_local_disk(dataset_factory, tmp_path, s3):  # noqa: F811
    url = upload(s3, dataset_factory(**AV1))
    options = [item for key, value in s3.storage_options().items() for item in ("--storage-option", f"{key}={value}")]
    done = transcode(url, tmp_path / "local", "--codec", "h264", *options, cache_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_frames_at_every_row(tmp_path / "local")
    assert json.loads((tmp_path / "local" / RECORD).read_text())["source"].startswith("s3://")


def ffmpeg_writing_into(folder) -> list:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "ffmpeg" and any(str(folder) in part for part in proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


@pytest.mark.slow
def test_ctrl_c_leaves_no_complete_looking_dataset_and_the_same_command_finishes_it(dataset_factory, tmp_path):
    src = dataset_factory(codec="h264", gop=2, episodes=8, episodes_per_file=1, cameras=1, width=320, height=240,
                          frames_per_episode=(45, 45))
    dst, state = tmp_path / "dst", tmp_path / "dst" / WORK / "state.json"
    command = [str(DL), "transcode", str(src), str(dst), "--codec", "hevc", "--preset", "medium", "--jobs", "1"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_with(DL_CACHE_DIR=str(tmp_path)))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until the first file is verified
        if state.is_file() and json.loads(state.read_text())["files"]:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "kept in" in err and "run the same command to continue" in err
    assert not (dst / "meta" / "info.json").exists(), "an interrupted transcode must not look like a dataset"
    assert not ffmpeg_writing_into(dst)
    kept = json.loads(state.read_text())["files"]
    assert 1 <= len(kept) < 8
    stamps = {rel: os.stat(dst / rel).st_mtime_ns for rel in kept}
    opened = dl_subprocess("info", dst, cache_dir=tmp_path)
    assert opened.returncode == 2 and "no meta/info.json" in opened.stderr
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env=env_with(DL_CACHE_DIR=str(tmp_path)))
    assert finished.returncode == 0, finished.stderr
    assert {rel: os.stat(dst / rel).st_mtime_ns for rel in kept} == stamps, "verified files were encoded again"
    assert len(json.loads((dst / RECORD).read_text())["files"]) == 8
    assert_same_frames_at_every_row(dst)


@pytest.mark.slow  # starts `dl` processes
def test_a_psnr_below_the_threshold_refuses_and_a_lower_one_finishes_without_encoding_again(dataset_factory,
                                                                                            tmp_path):
    src, dst = dataset_factory(**AV1), tmp_path / "dst"
    refused = transcode(src, dst, "--codec", "h264", "--crf", "40", "--min-psnr", "99", cache_dir=tmp_path)
    assert refused.returncode == 2 and "below --min-psnr 99.0 dB" in refused.stderr
    assert not (dst / "meta" / "info.json").exists()
    kept = json.loads((dst / WORK / "state.json").read_text())["files"]
    stamps = {rel: os.stat(dst / rel).st_mtime_ns for rel in kept}
    other = transcode(src, dst, "--codec", "h264", "--crf", "30", cache_dir=tmp_path)
    assert other.returncode == 2 and "crf: 40 there, 30 now" in other.stderr
    accepted = transcode(src, dst, "--codec", "h264", "--crf", "40", "--min-psnr", "10", cache_dir=tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    assert {rel: os.stat(dst / rel).st_mtime_ns for rel in kept} == stamps
    assert_same_frames_at_every_row(dst)


@pytest.mark.slow  # starts `dl` processes
def test_missing_videos_are_refused_or_left_missing_when_allowed(dataset_factory, writable_copy, tmp_path):
    src = writable_copy(dataset_factory(**AV1))
    gone = sorted(src.glob("videos/*/chunk-000/file-001.mp4"))[0]
    gone.unlink()
    refused = transcode(src, tmp_path / "a", "--codec", "h264", cache_dir=tmp_path)
    assert refused.returncode == 2 and str(gone.relative_to(src)) in refused.stderr
    assert "--allow-missing" in refused.stderr and "episode(s) 2-3" in refused.stderr
    done = transcode(src, tmp_path / "b", "--codec", "h264", "--allow-missing", cache_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "b" / gone.relative_to(src)).exists()
    assert len(video_files(tmp_path / "b")) == len(video_files(src))
    dataset = dl.make_dataset(str(tmp_path / "b"), episodes=[0, 1, 4], image_dtype="uint8")
    for i in range(len(dataset)):
        sample = dataset[i]
        assert read_frame_code(sample[dataset.meta.video_keys[0]])[0] == int(sample["index"])


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_depth_camera_is_copied_losslessly_never_reencoded(dataset_factory, tmp_path):
    src = dataset_factory(codec="h264", gop=2, episodes=3, frames_per_episode=(15, 20), episodes_per_file=2,
                          depth_camera=True)
    dst = tmp_path / "av1"
    done = transcode(src, dst, "--codec", "av1", "--gop", "2", cache_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    depth = sorted(p.relative_to(src) for p in src.joinpath("videos", "observation.images.depth").rglob("*.mp4"))
    assert depth and all((dst / rel).read_bytes() == (src / rel).read_bytes() for rel in depth)
    info = json.loads((dst / "meta" / "info.json").read_text())["features"]
    assert info["observation.images.depth"]["info"]["video.pix_fmt"] == "gray12le"
    assert info["observation.images.cam0"]["info"]["video.codec"] == "av1"
    old, new = dl.make_dataset(str(src)), dl.make_dataset(str(dst))
    for i in range(0, len(old), 7):
        assert np.array_equal(old[i]["observation.images.depth"].numpy(), new[i]["observation.images.depth"].numpy())
