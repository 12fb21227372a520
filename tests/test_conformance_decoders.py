"""The built-in decoders pass dl.testing's decoder conformance suite: `cpu` on every codec the synthetic generator
encodes (AV1, H.264, HEVC, MPEG-4 Part 2), also with two camera threads and exact seeking; `nvdec` on the codecs
every NVDEC generation decodes, where a GPU is present (here it skips, saying why)."""

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
