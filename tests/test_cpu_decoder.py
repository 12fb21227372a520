"""The `cpu` decoder beyond the conformance suite: seek_mode "auto" (exact where the container header cannot place
frames), the decoder cache bounded in bytes, option checks, concurrent camera decode equal to serial, and every
camera's decode ended before `decode` raises one's error."""

import shutil
import subprocess
import time

import pytest
import torch

import dl
from dl.contracts.decoder import FrameRequest
from dl.contracts.errors import DlError, VideoDecodeError
from dl.host.assembly import build_decoder, open_source
from dl.kits.video.decoder_cache import DecoderCache
from dl.kits.video.torchcodec_video import decoder_bytes, header_trustworthy, open_video
from dl.testing.synthetic import camera_key, read_frame_code


@pytest.fixture
def mp4_and_mkv(small_dataset, tmp_path):
    """A synthetic H.264 mp4 and the same stream remuxed into Matroska (no frame count in its header)."""
    meta = dl.make_dataset(str(small_dataset)).meta
    mp4 = small_dataset / meta.episodes[0].videos[camera_key(0)].path
    shutil.copy(mp4, tmp_path / "video.mp4")
    subprocess.run([shutil.which("ffmpeg"), "-v", "error", "-i", str(mp4), "-c", "copy", str(tmp_path / "video.mkv")],
                   check=True, timeout=60)
    return open_source(str(tmp_path))


def test_auto_seeks_exactly_where_the_header_cannot_place_frames(mp4_and_mkv):
    source = mp4_and_mkv
    approximate = open_video(source, "video.mkv", seek_mode="approximate")
    assert not header_trustworthy(approximate.metadata) and header_trustworthy(
        open_video(source, "video.mp4", seek_mode="approximate").metadata)
    decoder = build_decoder("cpu")
    assert decoder.probe(source, "video.mp4")["seek_mode"] == "approximate"
    assert decoder.probe(source, "video.mkv")["seek_mode"] == "exact"
    frames = decoder.frames_at(source, "video.mkv", [i / 30 for i in (0, 7, 19)])
    assert [read_frame_code(f)[0] for f in frames.data] == [0, 7, 19]


def test_seek_mode_approximate_is_kept_when_asked(mp4_and_mkv):
    decoder = build_decoder("cpu", {"seek_mode": "approximate"})
    assert decoder.probe(mp4_and_mkv, "video.mkv")["seek_mode"] == "approximate"


@pytest.mark.parametrize(("options", "match"), [({"seek_mode": "fast"}, "seek_mode must be one of auto, approximate"),
                                                ({"camera_threads": 0}, "camera_threads must be 'auto' or an integer"),
                                                ({"num_threads": -1}, "num_threads must be an integer >= 0")])
def test_bad_options_are_refused(options, match):
    with pytest.raises(DlError, match=match):
        build_decoder("cpu", options)


def test_cache_evicts_least_recent_decoders_past_its_byte_bound():
    cache = DecoderCache(10, max_bytes=250, size_of=lambda decoder: decoder[1])
    for key, size in [("a", 100), ("b", 100), ("c", 100)]:  # c pushes past 250: a goes
        cache.get(key, lambda k=key, s=size: (k, s))
    assert list(cache.open_decoders()) == ["b", "c"] and cache.bytes == 200
    cache.get("big", lambda: ("big", 400))  # larger than the bound alone: kept, everything else evicted
    assert list(cache.open_decoders()) == ["big"]
    stats = cache.stats()
    assert (stats["evictions"], stats["bytes"], stats["max_bytes"], stats["open"]) == (3, 400, 250, 1)


def test_cpu_decoder_cache_counts_estimated_bytes(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8", decoder_options={"cache_bytes": 10**9})
    dataset[0]
    cache = dataset.decoder.cache
    expected = sum(decoder_bytes(d, 4) for d in cache.open_decoders().values())
    assert cache.bytes == expected == 2 * 4 * 128 * 96 * 3 // 2  # two 128x96 files, 1 thread + 3 frames each
    small = dl.make_dataset(str(small_dataset), image_dtype="uint8", decoder_options={"cache_bytes": expected // 2})
    small[0]
    assert len(small.decoder.cache.open_decoders()) == 1, "the byte bound keeps one of the two cameras' decoders"


def test_cameras_in_threads_equal_one_after_another(small_dataset):
    meta = dl.make_dataset(str(small_dataset)).meta
    episode = meta.episodes[1]
    requests = [FrameRequest(episode.videos[camera_key(c)].path,
                             tuple(episode.videos[camera_key(c)].from_timestamp + i / 30 for i in range(5)), run=c == 0)
                for c in (0, 1)]
    threaded = build_decoder("cpu", {"camera_threads": 2}).decode(meta.source, requests)
    serial = build_decoder("cpu", {"camera_threads": 1}).decode(meta.source, requests)
    for a, b in zip(threaded, serial, strict=True):
        assert torch.equal(a.data, b.data) and torch.equal(a.pts_s, b.pts_s)
    assert [read_frame_code(f)[1] for f in threaded[1].data] == [1] * 5


def test_a_camera_that_fails_leaves_no_decode_running(small_dataset):
    # the decoder cache hands a file's decoder to the next call: a decode still running after another camera's error
    # would then share its FFmpeg decoder with a second thread (a segfault: 2 of 3 runs of 150-400 passes over the
    # samples of a dataset with a corrupt video, with camera threads; none in 300 passes since)
    from dl.plugins.cpu_decoder import CpuDecoder

    class Slow(CpuDecoder):
        def __init__(self, **options):
            super().__init__(**options)
            self.ended: list[str] = []

        def _frames(self, decoder, source, path, timestamps, run):
            if path == slow.path:
                time.sleep(0.3)  # the second camera is still decoding when the first one fails
                self.ended.append(path)
            return super()._frames(decoder, source, path, timestamps, run)

    meta = dl.make_dataset(str(small_dataset)).meta
    episode = meta.episodes[1]
    first, slow = (episode.videos[camera_key(c)] for c in (0, 1))
    requests = [FrameRequest(first.path, (first.from_timestamp + 999.0,), run=False),  # past its end: fails at once
                FrameRequest(slow.path, (slow.from_timestamp,), run=False)]
    decoder = Slow(camera_threads=2)
    with pytest.raises(VideoDecodeError, match="fall outside"):
        decoder.decode(meta.source, requests)
    assert decoder.ended == [slow.path], "decode() raised while another camera was still decoding"
