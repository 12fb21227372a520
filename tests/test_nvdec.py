"""Decoder `nvdec` without a GPU (this machine): it imports, is registered and documented, refuses to build with a
message naming each missing piece and the fix, asks the DataLoader for spawn workers and no pin_memory, and words
a codec the GPU cannot decode. Decoding itself runs in the decoder suite on a machine with a GPU
(tests/test_conformance_decoders.py::TestNvdecDecoder, which skips here with the factory's reason)."""

import pytest
import torch

import dl
from dl.contracts.errors import CodecUnsupportedError, DlError, transcode_command
from dl.dataloader.build import build_dataloader
from dl.host.assembly import build_decoder
from dl.plugins.nvdec_decoder import NvdecDecoder, cuda_problems, unsupported_codec

needs_no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: nvdec builds here")


@needs_no_gpu
def test_building_without_a_gpu_says_why_and_what_to_use():
    with pytest.raises(DlError) as caught:
        build_decoder("nvdec")
    message = str(caught.value)
    assert message.startswith("decoder nvdec needs an NVIDIA GPU that torch and torchcodec can use:")
    for problem in cuda_problems():
        assert problem in message
    assert "Use --decoder cpu" in message
    if torch.version.cuda is None:
        assert f"torch {torch.__version__} is a CPU build (no CUDA)" in message


@needs_no_gpu
def test_make_dataset_with_nvdec_fails_before_reading_frames(small_dataset):
    with pytest.raises(DlError, match="decoder nvdec needs an NVIDIA GPU"):
        dl.make_dataset(str(small_dataset), decoder="nvdec")


@pytest.mark.parametrize(("options", "match"), [({"device": "cpu"}, "device must be a CUDA device"),
                                                ({"seek_mode": "fast"}, "seek_mode must be one of")])
def test_bad_options_are_refused_before_looking_for_a_gpu(options, match):
    with pytest.raises(DlError, match=match):
        build_decoder("nvdec", options)


def test_av1_on_a_gpu_without_av1_nvdec_names_the_gpus_and_the_transcode_command():
    error = unsupported_codec("file:///data/ds", "videos/cam/file-000.mp4", "av1", "NVIDIA H100 80GB HBM3")
    message = str(error)
    assert isinstance(error, CodecUnsupportedError) and (error.codec, error.device) == ("av1", "NVIDIA H100 80GB HBM3")
    assert "file-000.mp4 is av1, which the NVDEC engine of this GPU (NVIDIA H100 80GB HBM3) cannot" in message
    assert "A100 and H100 have no AV1 NVDEC" in message and "L4, L40" in message
    assert "--decoder cpu" in message and message.endswith(error.fix)
    assert error.fix == "dl transcode /data/ds /data/ds-h264 --codec h264 --gop 2"
    assert "A100" not in str(unsupported_codec("u", "p.mp4", "vp9", "Tesla T4"))


@pytest.mark.parametrize(("url", "command"), [
    ("file:///data/ds/", "dl transcode /data/ds /data/ds-h264 --codec h264 --gop 2"),
    ("hf://datasets/lerobot/pusht@0123abc", "dl transcode hf://datasets/lerobot/pusht@0123abc ./pusht-h264 --codec "
                                            "h264 --gop 2"),
    ("s3://bucket/robots/ds", "dl transcode s3://bucket/robots/ds ./ds-h264 --codec h264 --gop 2")])
def test_the_transcode_command_writes_beside_a_local_dataset_else_here(url, command):
    assert transcode_command(url) == command


def test_asks_for_spawn_workers_and_no_pin_memory(small_dataset):
    needs = NvdecDecoder.__new__(NvdecDecoder).dataloader_needs()  # the needs, without a GPU to build one on
    assert (needs.multiprocessing_context, needs.pin_memory) == ("spawn", False)
    dataset = dl.make_dataset(str(small_dataset))
    dataset.decoder.dataloader_needs = lambda: needs  # as an nvdec-backed loader would state them
    loader = build_dataloader(dataset, batch_size=2, num_workers=1)
    assert loader.multiprocessing_context.get_start_method() == "spawn" and loader.pin_memory is False
    assert loader.facts()["multiprocessing_context"] == "spawn" and loader.facts()["pin_memory"] is False
