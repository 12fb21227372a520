"""The video files of a synthetic dataset with real recordings' frame times (`dl.testing.synthetic.SyntheticConfig`:
``concatenated``, ``recording_tail_s``, ``video_rate``, ``vfr_jitter``, ``edit_list_frames``), written with FFmpeg
as LeRobot's tools and real recorders write them; each file's episode spans (``from_timestamp``, ``to_timestamp``)
are what those tools record, read back from the files where they read them."""

from __future__ import annotations

import pathlib
import subprocess
import tempfile
from collections.abc import Callable

import numpy as np

from .synthetic_spec import INDEX_BITS, SyntheticConfig, _rate, vfr_times

VFR_TIMESCALE = 90000
"""The mp4 track timescale of a variable-frame-rate file (its frame times are rounded to it)."""


def input_args(cfg: SyntheticConfig) -> tuple[list[str], list[str]]:
    """(FFmpeg's raw-input rate, the output options that time the frames): the camera's rate (``video_rate``, else
    ``fps``), or each frame at ``vfr_times`` (``setpts`` on a 1/90000 timeline, passed through unchanged)."""
    if cfg.vfr_jitter:
        timeline = f"1/{VFR_TIMESCALE}"
        return ["-r", str(cfg.fps)], ["-vf", f"settb={timeline},setpts=(N+{cfg.vfr_jitter}*sin(N))/({cfg.fps}*TB)",
                                      "-fps_mode", "passthrough", "-enc_time_base", timeline,
                                      "-video_track_timescale", str(VFR_TIMESCALE)]
    return ["-r", cfg.video_rate or str(cfg.fps)], []


def write_camera_file(encode: Callable[[pathlib.Path, list[int]], None], ffmpeg: str, path: pathlib.Path,
                      cfg: SyntheticConfig, spans: list[range]) -> list[tuple[float, float]]:
    """Write one camera's video file holding the episodes whose global frame indices are `spans` (in order);
    `encode(path, indices)` encodes the frames of `indices` (their index codes) into one mp4; the frames an edit
    list hides carry indices just below 2**24, which no row has. Returns each episode's `(from_timestamp,
    to_timestamp)`.

    Raises:
        RuntimeError: FFmpeg or ffprobe fails.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if cfg.concatenated:
        with tempfile.TemporaryDirectory(prefix=".recordings-", dir=path.parent) as tmp:
            recordings = []
            for i, span in enumerate(spans):
                recordings.append(pathlib.Path(tmp) / f"episode-{i}.mp4")
                encode(recordings[-1], list(span))
                if cfg.recording_tail_s or cfg.movie_timescale:
                    _remux(ffmpeg, recordings[-1], cfg, len(span))
            durations = [stream_duration(ffmpeg, rec) for rec in recordings]
            _concat(ffmpeg, recordings, path, pathlib.Path(tmp) / "list.ffconcat")
        starts = np.concatenate([[0.0], np.cumsum(durations)])
        return [(float(starts[i]), float(starts[i] + durations[i])) for i in range(len(spans))]
    indices = [i for span in spans for i in span]
    if cfg.edit_list_frames:
        hidden = [2**INDEX_BITS - 1 - k for k in range(cfg.edit_list_frames)]
        with tempfile.TemporaryDirectory(prefix=".uncut-", dir=path.parent) as tmp:
            uncut = pathlib.Path(tmp) / "uncut.mp4"
            encode(uncut, hidden + indices)
            lead = cfg.edit_list_frames / _rate(cfg.video_rate or str(cfg.fps))
            _run([ffmpeg, "-hide_banner", "-loglevel", "error", "-ss", f"{lead:.9f}", "-i", str(uncut), "-c", "copy",
                  "-y", str(path)], path)
    else:
        encode(path, indices)
    if cfg.vfr_jitter:
        times = vfr_times(cfg, len(indices) + 1)
        times[-1] = times[-2] + 1 / cfg.fps
    else:
        times = np.arange(len(indices) + 1) / _rate(cfg.video_rate or str(cfg.fps))
    out, at = [], 0
    for span in spans:
        out.append((float(times[at]), float(times[at + len(span)])))
        at += len(span)
    return out


def stream_duration(ffmpeg: str, path: pathlib.Path) -> float:
    """The video stream's duration (s), as LeRobot's `get_video_duration_in_s` reads it (stream duration x time
    base), through ffprobe."""
    probe = str(pathlib.Path(ffmpeg).with_name("ffprobe"))
    out = _run([probe, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=duration", "-of", "csv=p=0",
                str(path)], path)
    return float(out.strip())


def _remux(ffmpeg: str, path: pathlib.Path, cfg: SyntheticConfig, frames: int) -> None:
    """Remux the recording `path` of `frames` frames (stream copy) with its last packet `recording_tail_s` longer
    (the `setts` bitstream filter, in the stream's time base) and the movie timescale `movie_timescale`."""
    out = path.with_name(f"remuxed-{path.name}")
    expr = f"if(eq(N\\,{frames - 1})\\,DURATION+{cfg.recording_tail_s}/TB\\,DURATION)"
    timescale = ["-movie_timescale", str(cfg.movie_timescale)] if cfg.movie_timescale else []
    _run([ffmpeg, "-hide_banner", "-loglevel", "error", "-i", str(path), "-c", "copy", "-bsf:v",
          f"setts=pts=PTS:dts=DTS:duration={expr}", *timescale, "-y", str(out)], path)
    out.replace(path)


def _concat(ffmpeg: str, recordings: list[pathlib.Path], path: pathlib.Path, listing: pathlib.Path) -> None:
    """Join `recordings` into `path` as LeRobot's `concatenate_video_files`: the concat demuxer, stream copy,
    faststart."""
    listing.write_text("ffconcat version 1.0\n" + "".join(f"file '{r.resolve()}'\n" for r in recordings))
    path.parent.mkdir(parents=True, exist_ok=True)
    _run([ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy",
          "-movflags", "faststart", "-y", str(path)], path)


def _run(cmd: list[str], path: pathlib.Path) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{pathlib.Path(cmd[0]).name} failed (exit {proc.returncode}) on {path}:\n"
                           f"{proc.stderr[-3000:]}")
    return proc.stdout
