"""dl.transcode's checks and options without FFmpeg: new episode spans from frame times (and the refusals when
counts or times do not match), the GOP read from keyframes, option ranges, the encoder arguments, the work record's
refusals."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.contracts.errors import DlError
from dl.transcode.ffmpeg import Frames, TranscodeError
from dl.transcode.options import TranscodeOptions
from dl.transcode.state import WORK, State
from dl.transcode.verify import EpisodeRows, new_spans

FPS = 30


def frames(n: int, offset: float = 0.0, gop: int = 2) -> Frames:
    return Frames(offset + np.arange(n) / FPS, np.arange(0, n, gop))


@settings(max_examples=examples(50), deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=6), gap=st.integers(0, 5),
       shift=st.sampled_from([0.0, 1 / FPS, 0.5]))
def test_spans_follow_the_new_frames_whatever_the_files_start_at(lengths, gap, shift):
    """Episodes packed one after another (with `gap` frames between them) in a file whose re-encode starts
    `shift` s later: each new span starts on its first frame in the new file and ends one frame period after its
    last."""
    starts = np.cumsum([0] + [n + gap for n in lengths[:-1]])
    total = int(starts[-1] + lengths[-1] + gap)
    episodes = [EpisodeRows(i, s / FPS, np.arange(n) / FPS) for i, (s, n) in enumerate(zip(starts, lengths,
                                                                                           strict=True))]
    spans = new_spans("v.mp4", frames(total), frames(total, shift), episodes, FPS, 1e-4)
    for i, (s, n) in enumerate(zip(starts, lengths, strict=True)):
        assert spans[i][0] == pytest.approx(shift + s / FPS, abs=1e-9)
        assert spans[i][1] == pytest.approx(shift + (s + n) / FPS, abs=1e-9)


def test_a_dropped_frame_or_a_shifted_row_is_refused():
    rows = [EpisodeRows(0, 0.0, np.arange(10) / FPS)]
    with pytest.raises(TranscodeError, match="has 9 frames, the original 10"):
        new_spans("v.mp4", frames(10), frames(9), rows, FPS, 1e-4)
    late = Frames(np.r_[np.arange(5), np.arange(6, 11)] / FPS, np.array([0]))  # a frame missing in time
    with pytest.raises(TranscodeError, match=r"episode 0, row 5: the re-encoded file's frame lies 0.033333 s"):
        new_spans("v.mp4", frames(10), late, rows, FPS, 1e-4)
    with pytest.raises(TranscodeError, match="where the original video shows no frame"):
        new_spans("v.mp4", frames(10), frames(10), [EpisodeRows(3, 0.5 / FPS, np.arange(5) / FPS)], FPS, 1e-4)
    with pytest.raises(TranscodeError, match="has 12 rows but the video holds 10 frames"):
        new_spans("v.mp4", frames(10), frames(10), [EpisodeRows(0, 0.0, np.arange(12) / FPS)], FPS, 1e-4)
    bad_rows = [EpisodeRows(0, 0.0, np.arange(10) / 25)]  # rows at another frame rate than the video
    with pytest.raises(TranscodeError, match="the original file's frame lies .* run `dl validate`"):
        new_spans("v.mp4", frames(10), frames(10), bad_rows, FPS, 1e-4)


def test_the_gop_is_the_most_common_keyframe_interval():
    assert Frames(np.arange(30.0), np.array([0, 12, 24, 29])).gop == 12
    assert Frames(np.arange(3.0), np.array([0])).gop is None


def test_options_refuse_values_out_of_range_naming_the_flag():
    for kwargs, flag in [({"codec": "vp9"}, "--codec"), ({"codec": "h264", "crf": 60}, "--crf for h264 must be 0..51"),
                         ({"codec": "av1", "preset": "fast"}, "--preset for av1"),
                         ({"codec": "h264", "gop": 0}, "--gop"),
                         ({"codec": "av1", "bframes": 2, "gop": 8}, "AV1 has no B-frames"),
                         ({"codec": "h264", "bframes": 4, "gop": 2}, "needs a GOP longer"),
                         ({"codec": "av1", "pix_fmt": "yuv444p"}, "SVT-AV1 encodes")]:
        with pytest.raises(DlError, match=flag):
            TranscodeOptions(**kwargs)


@pytest.mark.parametrize("codec", ["h264", "hevc", "av1"])
def test_encoder_arguments_ask_for_closed_gops_at_the_given_interval(codec):
    options = TranscodeOptions(codec, gop=12)
    args = " ".join(options.encoder_args(threads=3))
    assert options.crf is not None and options.preset is not None
    expected = {"h264": ["-g 12", "-keyint_min 12", "-sc_threshold 0", "-bf 0", "+cgop", "-threads 3"],
                "hevc": ["keyint=12", "min-keyint=12", "scenecut=0", "open-gop=0", "bframes=0", "pools=3"],
                "av1": ["-g 12", "irefresh-type=2", "lp=3"]}[codec]
    assert all(part in args for part in expected), args
    assert TranscodeOptions(codec).identity() == TranscodeOptions(codec, min_psnr_db=10, tolerance_s=1).identity()


def test_the_work_record_refuses_what_is_not_its_own(tmp_path):
    job = {"source": "file:///a", **TranscodeOptions("h264").identity()}
    (tmp_path / "dataset" / "meta").mkdir(parents=True)
    (tmp_path / "dataset" / "meta" / "info.json").write_text("{}")
    with pytest.raises(TranscodeError, match="already holds a dataset"):
        State.open(tmp_path / "dataset", job)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(TranscodeError, match="not an empty folder"):
        State.open(tmp_path / "other", job)
    state = State.open(tmp_path / "new", job)
    (tmp_path / "new" / "v.mp4").write_bytes(b"1234")
    state.record("v.mp4", {"size": 4, "spans": {"0": [0.0, 1.0]}})
    again = State.open(tmp_path / "new", job)
    assert again.done("v.mp4") == {"size": 4, "spans": {"0": [0.0, 1.0]}}
    (tmp_path / "new" / "v.mp4").write_bytes(b"12345")  # changed since it was verified: not trusted
    assert again.done("v.mp4") is None
    with pytest.raises(TranscodeError, match=r"crf: 18 there, 23 now.*same command again"):
        State.open(tmp_path / "new", {**job, "crf": 23})
    assert json.loads((tmp_path / "new" / WORK / "state.json").read_text())["job"] == job
