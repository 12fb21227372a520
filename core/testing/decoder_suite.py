"""The decoder conformance suite: what every dl decoder must do, as pytest tests to inherit.

    from dl.testing.decoder_suite import DecoderSuite

    class TestMyDecoder(DecoderSuite):
        decoder = "mine"                 # the registered name
        decoder_options = {}
        codecs = ("h264", "hevc")        # the codecs it claims (each gets a generated video)

What it checks, on videos FFmpeg encodes for the test (`dl.testing.synthetic`, every frame drawing its
global index): frames equal to a reference decoder's at the same timestamps (the `ffmpeg` command line
decoding the whole file to RGB: the same frame, pixels within `pixel_tolerance`), presentation
timestamps within a frame of the query, runs of consecutive frames (`frames_in_run`) equal to `frames_at`,
several files in one `decode` call answered in order, timestamps outside the stream refused with
`VideoDecodeError`, `probe` facts, pickling, and decoding in forked DataLoader workers after the parent
decoded (no decoder crosses a fork) and in spawned ones. A decoder that needs a device skips with the reason
its factory raises (`DecoderUnavailableError`); any other error fails.
"""

import pickle
import shutil
import subprocess
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dl.contracts.decoder import FrameRequest
from dl.contracts.errors import DecoderUnavailableError, VideoDecodeError
from dl.host.assembly import open_dataset
from dl.host.manager import get_plugins
from dl.testing.examples import scaled
from dl.testing.synthetic import SyntheticConfig, camera_key, read_frame_code, write_synthetic_dataset

SUITE_SETTINGS = settings(max_examples=scaled(12), deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                 HealthCheck.differing_executors])


@cache
def reference_frames(path: str, width: int, height: int) -> np.ndarray:
    """Every frame of the video at `path` decoded by the `ffmpeg` command line to RGB: uint8 [N, H, W, 3]."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError("the decoder suite's reference is the ffmpeg command line; install FFmpeg")
    raw = subprocess.run([ffmpeg, "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-vsync", "0",
                          "-"], capture_output=True, check=True, timeout=120).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


class _Decode:
    """A map-style dataset decoding one timestamp per item (for the forked-workers test)."""

    def __init__(self, decoder, source, path, timestamps):
        self.decoder, self.source, self.path, self.timestamps = decoder, source, path, timestamps

    def __len__(self):
        return len(self.timestamps)

    def __getitem__(self, i):
        return self.decoder.frames_at(self.source, self.path, [self.timestamps[i]]).data[0].cpu()


class DecoderSuite:
    """Inherit in a test class and set `decoder` (and `decoder_options`, `codecs`, `pixel_tolerance`).

    Attributes:
        decoder: the registered decoder name.
        decoder_options: keyword options for its factory.
        codecs: codecs to test, from `dl.testing.synthetic.CODECS`.
        pixel_tolerance: the largest mean absolute difference (0-255 scale) from the reference per frame;
            colour conversion may differ slightly between decoders, the frame may not.
    """

    decoder: str = ""
    decoder_options: dict = {}
    codecs: tuple[str, ...] = ("h264", "av1")
    pixel_tolerance: float = 4.0

    @pytest.fixture(scope="class")
    @classmethod
    def videos(cls, tmp_path_factory) -> dict:
        """`{codec: dataset root}`: 2 episodes of 25-30 frames per file, GOP 5, 128x96, two cameras."""
        out = {}
        for codec in cls.codecs:
            config = SyntheticConfig(episodes=2, frames_per_episode=(25, 30), cameras=2, codec=codec, gop=5,
                                     episodes_per_file=2)
            out[codec] = write_synthetic_dataset(tmp_path_factory.mktemp("decoder-suite") / codec, config)
        return out

    @staticmethod
    def video(videos: dict, codec: str):
        """(source, path of the generated video file of `codec`, its frame count, fps)."""
        meta = open_dataset(str(videos[codec]))
        path = meta.episodes[0].videos[camera_key(0)].path
        return meta.source, path, sum(e.length for e in meta.episodes.values()), meta.fps

    def make_decoder(self):
        """The decoder under test; skips (with its reason) when its factory raises `DecoderUnavailableError` (this
        machine cannot run it). Any other error, a mistyped option among them, fails the test."""
        try:
            return get_plugins().registry.create("decoder", self.decoder, **self.decoder_options)
        except DecoderUnavailableError as exc:
            pytest.skip(f"decoder {self.decoder!r} cannot run here: {exc}")

    # ------------------------------------------------------------------------------------ values
    @SUITE_SETTINGS
    @given(data=st.data())
    def test_frames_equal_the_reference(self, videos, data):
        codec = data.draw(st.sampled_from(self.codecs), label="codec")
        source, path, frames, fps = self.video(videos, codec)
        decoder = self.make_decoder()
        indices = data.draw(st.lists(st.integers(0, frames - 1), min_size=1, max_size=6), label="frame indices")
        timestamps = [i / fps for i in indices]
        decoded = decoder.frames_at(source, path, timestamps)
        got = decoded.data.cpu()
        assert got.dtype.is_floating_point is False and got.shape[0] == len(indices) and got.shape[1] == 3
        reference = reference_frames(source.path(path), got.shape[3], got.shape[2])
        for k, index in enumerate(indices):
            frame = got[k].permute(1, 2, 0).numpy()
            assert read_frame_code(frame) == read_frame_code(reference[index]), f"{codec}: wrong frame at {index}"
            diff = np.abs(frame.astype(np.int16) - reference[index].astype(np.int16)).mean()
            assert diff <= self.pixel_tolerance, f"{codec}: frame {index} differs by {diff:.2f} on average"
        pts = decoded.pts_s.cpu().double().numpy()
        assert np.all(np.abs(pts - np.asarray(timestamps)) < 0.5 / fps), f"{codec}: pts {pts} for {timestamps}"

    @SUITE_SETTINGS
    @given(data=st.data())
    def test_runs_equal_frames_at(self, videos, data):
        codec = data.draw(st.sampled_from(self.codecs), label="codec")
        source, path, frames, fps = self.video(videos, codec)
        decoder = self.make_decoder()
        start = data.draw(st.integers(0, frames - 1), label="first frame")
        count = data.draw(st.integers(1, min(12, frames - start)), label="frames")
        timestamps = [(start + i) / fps for i in range(count)]
        run = decoder.frames_in_run(source, path, timestamps)
        single = decoder.frames_at(source, path, timestamps)
        assert run.data.shape == single.data.shape and run.data.shape[0] == count
        assert np.array_equal(run.data.cpu().numpy(), single.data.cpu().numpy()), f"{codec}: run != frames_at"
        assert np.array_equal(run.pts_s.numpy(), single.pts_s.numpy())
        assert [read_frame_code(f)[0] for f in run.data.cpu()] == list(range(start, start + count))

    def test_decode_answers_each_request_in_order(self, videos):
        meta = open_dataset(str(videos[self.codecs[0]]))
        episode = meta.episodes[0]
        cam0, cam1 = (episode.videos[camera_key(c)].path for c in (0, 1))
        fps = meta.fps
        requests = [FrameRequest(cam0, (2 / fps, 3 / fps, 4 / fps), run=True), FrameRequest(cam1, (7 / fps, 1 / fps)),
                    FrameRequest(cam0, (9 / fps,)), FrameRequest(cam1, (5 / fps, 6 / fps), run=True)]
        decoder = self.make_decoder()
        got = decoder.decode(meta.source, requests)
        assert len(got) == len(requests)
        for request, decoded in zip(requests, got, strict=True):
            camera = 0 if request.path == cam0 else 1
            assert [read_frame_code(f) for f in decoded.data.cpu()] == [(round(t * fps), camera)
                                                                          for t in request.timestamps]

    @pytest.mark.parametrize("where", ["before", "after"])
    def test_timestamps_outside_the_stream_are_refused(self, videos, where):
        for codec in self.codecs:
            source, path, frames, fps = self.video(videos, codec)
            t = -1.0 if where == "before" else (frames + 5) / fps
            with pytest.raises(VideoDecodeError, match=path.split("/")[-1]):
                self.make_decoder().frames_at(source, path, [0.0, t])

    def test_probe(self, videos):
        for codec in self.codecs:
            source, path, frames, fps = self.video(videos, codec)
            facts = self.make_decoder().probe(source, path)
            assert {"codec", "width", "height", "num_frames", "average_fps", "duration_s"} <= set(facts)
            assert (facts["codec"], facts["width"], facts["height"]) == (codec, 128, 96)
            assert facts["num_frames"] == frames and abs(facts["average_fps"] - fps) < 1e-6

    # ------------------------------------------------------------------------------------ processes
    def test_pickles_with_open_decoders(self, videos):
        source, path, _, fps = self.video(videos, self.codecs[0])
        decoder = self.make_decoder()
        first = decoder.frames_at(source, path, [3 / fps]).data.cpu()
        copy = pickle.loads(pickle.dumps(decoder))
        assert np.array_equal(copy.frames_at(source, path, [3 / fps]).data.cpu(), first)

    def test_safe_after_fork(self, videos):
        import torch.utils.data

        source, path, frames, fps = self.video(videos, self.codecs[0])
        decoder = self.make_decoder()
        timestamps = [i / fps for i in range(frames)]
        parent = [decoder.frames_at(source, path, [t]).data[0].cpu() for t in timestamps[:3]]  # opens decoders
        decoder.cache.reset_stats()
        loader = torch.utils.data.DataLoader(_Decode(decoder, source, path, timestamps), batch_size=None,
                                             num_workers=2, multiprocessing_context="fork")
        got = list(loader)
        assert [read_frame_code(f)[0] for f in got] == [read_frame_code(f)[0] for f in
                                                        [decoder.frames_at(source, path, [t]).data[0].cpu()
                                                         for t in timestamps]]
        assert all(np.array_equal(a, b) for a, b in zip(got[:3], parent, strict=True))
        assert decoder.cache.stats()["misses"] >= 2, "forked workers reused the parent's open decoders"

    @pytest.mark.slow  # spawned DataLoader workers import torch and dl anew
    def test_spawned_workers(self, videos):
        import torch.utils.data

        source, path, frames, fps = self.video(videos, self.codecs[0])
        decoder = self.make_decoder()
        timestamps = [i / fps for i in range(0, frames, 3)]
        expected = [read_frame_code(decoder.frames_at(source, path, [t]).data[0]) for t in timestamps]
        assert expected == [(i, 0) for i in range(0, frames, 3)]  # the parent now holds open decoders
        loader = torch.utils.data.DataLoader(_Decode(decoder, source, path, timestamps), batch_size=None,
                                             num_workers=1, multiprocessing_context="spawn")
        assert [read_frame_code(f) for f in loader] == expected
