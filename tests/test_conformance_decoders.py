"""The built-in `cpu` decoder passes dl.testing's decoder conformance suite, on every codec the synthetic
generator encodes (AV1, H.264, HEVC, MPEG-4 Part 2)."""

from dl.testing.decoder_suite import DecoderSuite
from dl.testing.synthetic import CODECS


class TestCpuDecoder(DecoderSuite):
    decoder = "cpu"
    codecs = CODECS
    pixel_tolerance = 0.0  # bit-identical to the ffmpeg command line (the same libavcodec and swscale)
