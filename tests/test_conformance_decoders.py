"""The built-in decoders pass dl.testing's decoder conformance suite: `cpu` on every codec the synthetic generator
encodes (AV1, H.264, HEVC, MPEG-4 Part 2), also with two camera threads and exact seeking; `nvdec` on the codecs
every NVDEC generation decodes, where a GPU is present (here it skips, saying why)."""

import pytest

from dl.contracts.errors import DlError, PluginError
from dl.testing.decoder_suite import DecoderSuite
from dl.testing.synthetic import CODECS


class TestCpuDecoder(DecoderSuite):
    decoder = "cpu"
    codecs = CODECS
    pixel_tolerance = 0.0  # bit-identical to the ffmpeg command line (the same libavcodec and swscale)


class TestCpuDecoderThreadsExact(DecoderSuite):
    """The cameras of one `decode` call in two threads, and torchcodec's exact seek mode (one scan per file)."""

    decoder = "cpu"
    decoder_options = {"camera_threads": 2, "seek_mode": "exact"}
    codecs = ("av1", "h264")
    pixel_tolerance = 0.0


class TestNvdecDecoder(DecoderSuite):
    decoder = "nvdec"
    codecs = ("h264", "hevc")
    pixel_tolerance = 4.0  # NVDEC's colour conversion differs slightly from swscale's


def _suite(decoder: str, **options) -> DecoderSuite:
    return type("Suite", (DecoderSuite,), {"decoder": decoder, "decoder_options": options})()


def test_a_mistyped_option_fails_the_suite_instead_of_skipping_it():
    with pytest.raises(PluginError, match=r"decoder 'cpu' \(dl\) does not take option cache_sise"):
        _suite("cpu", cache_sise=8).make_decoder()
    with pytest.raises(DlError, match="seek_mode must be one of"):
        _suite("cpu", seek_mode="fastest").make_decoder()


def test_a_decoder_this_machine_cannot_run_skips_with_its_reason(monkeypatch):
    import dl.plugins.nvdec_decoder

    monkeypatch.setattr(dl.plugins.nvdec_decoder, "cuda_problems", lambda: ["no GPU in this test"])
    with pytest.raises(pytest.skip.Exception, match=r"decoder 'nvdec' cannot run here: .*no GPU in this test"):
        _suite("nvdec").make_decoder()
