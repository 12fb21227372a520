"""`dl diagnose`: the decode path of one frame per camera, with a verdict naming the failing step and its fix."""

import json

import pytest
import torch
from cli_helpers import invoke

from dl.cli.diagnosis import container_of, diagnose, not_a_container
from dl.testing.synthetic import camera_key


def diagnosis(*args):
    result = invoke("diagnose", *args, "--json")
    return result.exit_code, json.loads(result.output)


def test_a_good_dataset_decodes_one_frame_per_camera(small_dataset):
    code, found = diagnosis("--root", small_dataset)
    assert code == 0 and found["ok"] and found["verdict"].startswith("the decode path works")
    assert {"torch", "torchcodec", "ffmpeg", "libavcodec", "libavformat"} <= set(found["versions"])
    assert [s["name"] for s in found["steps"]] == ["dataset", "decoder"] + [
        f"{camera_key(c)}: {step}" for c in (0, 1) for step in ("container", "stream", "frame")]
    cam = found["streams"][camera_key(0)]
    assert (cam["codec"], cam["gop_frames"], cam["seek_mode"], cam["codec_info_json"]) == ("h264", 4, "approximate",
                                                                                             "h264")
    assert cam["first_bytes"].split()[4:8] == ["66", "74", "79", "70"]  # "ftyp"


def test_the_table_names_versions_steps_and_verdict(small_dataset):
    result = invoke("diagnose", "--root", small_dataset)
    assert result.exit_code == 0
    for text in ("versions torch", "libavcodec", "GOP 4", "decode path", "verdict the decode path works"):
        assert text in result.output


@pytest.mark.parametrize(("content", "fix"), [
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12345\n", "Git LFS pointer"),
    (b"<!DOCTYPE html><html><body>rate limited</body></html>", "HTML/XML page"),
    (b"", "the file is empty"),
    (b"\x00\x01garbage bytes that are no video at all", "not an MP4 or Matroska file")])
def test_a_file_that_is_no_container_shows_its_first_bytes_and_the_fix(small_dataset, writable_copy, content, fix):
    root = writable_copy(small_dataset)
    found = diagnose(str(root))
    path = found.streams[camera_key(1)]["path"]
    (root / path).write_bytes(content)
    code, found = diagnosis("--root", root)
    failed = [s for s in found["steps"] if not s["ok"]]
    assert code == 1 and failed[0]["name"] == f"{camera_key(1)}: container" and fix in failed[0]["fix"]
    assert repr(content[:32]) in failed[0]["detail"] and found["verdict"].startswith(f"{camera_key(1)}: container")


def test_a_missing_video_is_named(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    path = diagnose(str(root)).streams[camera_key(0)]["path"]
    (root / path).unlink()
    code, found = diagnosis("--root", root, "--episode", "0")
    assert code == 1 and f"({path}) is missing" in found["verdict"]


def test_a_codec_lie_in_info_json_is_shown(dataset_factory):
    root = dataset_factory(codec="mpeg4", info_codec="h264", episodes=2, cameras=1)
    code, found = diagnosis("--root", root)
    stream = next(s for s in found["steps"] if s["name"].endswith("stream"))
    assert code == 0 and "info.json says codec 'h264': the stream is decoded as mpeg4" in stream["detail"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: nvdec builds here")
def test_nvdec_without_a_gpu_fails_at_the_decoder_step(small_dataset):
    code, found = diagnosis("--root", small_dataset, "--decoder", "nvdec")
    assert code == 1 and found["steps"][-1]["name"] == "decoder" and "NVIDIA GPU" in found["steps"][-1]["detail"]
    assert found["verdict"].endswith("Fix: use --decoder cpu.")


def test_not_a_dataset_and_usage_errors(tmp_path):
    code, found = diagnosis("--root", tmp_path)
    assert code == 1 and found["steps"][0]["name"] == "dataset" and "meta/info.json" in found["steps"][0]["detail"]
    assert invoke("diagnose").exit_code == 2


def test_container_signatures():
    assert container_of(b"\x00\x00\x00\x20ftypisom") == "MP4/MOV (ISO BMFF)"
    assert container_of(b"\x1a\x45\xdf\xa3\x01") == "Matroska/WebM" and container_of(b"RIFF....AVI ") is None
    assert "Git LFS" in not_a_container(b"version https://git-lfs.github.com/spec/v1")


def test_a_torchcodec_without_the_keyframe_index_says_why_the_gop_is_unknown(small_dataset, monkeypatch):
    import torchcodec
    from torchcodec.decoders import VideoDecoder

    monkeypatch.delattr(VideoDecoder, "_get_key_frame_indices")
    found = diagnose(str(small_dataset))
    assert found.ok and found.streams["observation.images.cam0"]["gop_frames"] is None
    stream = next(s for s in found.steps if s.name == "observation.images.cam0: stream")
    assert (f"GOP unknown (torchcodec {torchcodec.__version__} has no VideoDecoder._get_key_frame_indices to read "
            "it)") in stream.detail


def test_it_says_what_it_did_not_check_and_shows_first_bytes_only_when_asked(small_dataset, writable_copy):
    root = writable_copy(small_dataset)  # 3 episodes per file: the second file holds episodes 3-5
    (root / f"videos/{camera_key(1)}/chunk-000/file-001.mp4").unlink()
    result = invoke("diagnose", "--root", root)
    assert result.exit_code == 0, result.output  # episode 0 decodes
    words = " ".join(result.output.split())
    assert "6 episodes (3 of them with missing files)" in words
    assert "not checked 5 other episode(s), of which 3 with missing files (episodes 3-5)" in words
    assert f"`dl validate {root}` checks every file and frame" in words
    assert "first bytes" not in words
    verbose = " ".join(invoke("diagnose", "--root", root, "--verbose").output.split())
    assert "first bytes b'" in verbose
