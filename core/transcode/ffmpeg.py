"""FFmpeg and ffprobe as `dl transcode` runs them: subprocesses on local files (no network), each stoppable from
another thread (`Processes.stop_all`), each failure a `TranscodeError` with FFmpeg's own last lines."""

import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..contracts.errors import DlError
from .options import ENCODERS, TranscodeOptions


class TranscodeError(DlError):
    """A file could not be re-encoded or failed a check; the message names it and says what to do."""


def tools() -> tuple[str, str]:
    """The `ffmpeg` and `ffprobe` executables on PATH.

    Raises:
        TranscodeError: either is missing.
    """
    found = shutil.which("ffmpeg"), shutil.which("ffprobe")
    if None in found:
        raise TranscodeError("dl transcode needs FFmpeg's ffmpeg and ffprobe on PATH (Debian: apt-get install ffmpeg).")
    return found


def check_encoder(ffmpeg: str, options: TranscodeOptions) -> None:
    """Raise `TranscodeError` when this FFmpeg lacks the encoder `options` need."""
    listed = subprocess.run([ffmpeg, "-hide_banner", "-encoders"], capture_output=True, text=True, check=False).stdout
    encoder = ENCODERS[options.codec]
    if not re.search(rf"^\s*V\S*\s+{re.escape(encoder)}\s", listed, flags=re.M):
        raise TranscodeError(f"this FFmpeg ({ffmpeg}) has no {encoder} encoder for --codec {options.codec}: install "
                             "an FFmpeg built with it (Debian's ffmpeg package has libx264, libx265 and libsvtav1).")


class Processes:
    """The subprocesses a transcode has running, so Ctrl-C (or a failure elsewhere) stops them all."""

    def __init__(self):
        self._lock, self._live, self.stopped = threading.Lock(), set(), threading.Event()

    def run(self, command: list[str], on_line: Callable[[str], None] | None = None) -> tuple[int, str]:
        """Run `command` to its end; stdout lines go to `on_line`; returns (exit status, stderr's last 3000
        characters). Raises `TranscodeError` when the transcode is being stopped."""
        if self.stopped.is_set():
            raise TranscodeError("stopped")
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace")
        with self._lock:
            self._live.add(proc)
        try:
            errors = []
            reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
            reader.start()
            for line in proc.stdout:
                if on_line is not None:
                    on_line(line.rstrip("\n"))
            code = proc.wait()
            reader.join()
        finally:
            with self._lock:
                self._live.discard(proc)
        if self.stopped.is_set():
            raise TranscodeError("stopped")
        return code, "".join(errors)[-3000:]

    def stop_all(self) -> None:
        """Stop every running subprocess (SIGTERM, then SIGKILL after 5 s) and refuse new ones."""
        self.stopped.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            proc.terminate()
        for proc in live:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def encode(processes: Processes, ffmpeg: str, src: str, dst: str, options: TranscodeOptions, threads: int,
           on_frames: Callable[[int], None]) -> None:
    """Re-encode the first video stream of `src` into the MP4 `dst`: every frame kept with its timestamp
    (`-fps_mode passthrough`), no audio, the index at the front (`+faststart`: a reader of a remote copy finds it
    in the first bytes). `on_frames(n)` hears each advance of the frames encoded so far.

    Raises:
        TranscodeError: FFmpeg failed; the message holds its last lines.
    """
    done = [0]

    def progress(line: str) -> None:
        if line.startswith("frame="):
            n = int(line.split("=", 1)[1] or 0)
            if n > done[0]:
                on_frames(n - done[0])
                done[0] = n

    command = [ffmpeg, "-hide_banner", "-nostdin", "-loglevel", "error", "-nostats", "-progress", "pipe:1", "-y",
               "-i", src, "-map", "0:v:0", "-an", "-sn", "-dn", *options.encoder_args(threads),
               "-pix_fmt", options.pix_fmt, "-fps_mode", "passthrough", "-movflags", "+faststart", "-f", "mp4", dst]
    code, errors = processes.run(command, progress)
    if code != 0:
        raise TranscodeError(f"ffmpeg failed (exit status {code}) re-encoding {src}: {_tail(errors)}")


@dataclass(frozen=True)
class Frames:
    """A video stream's frames as its container lists them (no decoding): `pts_s` float64 [N], presentation times
    in seconds, ascending; `keyframes` int64, the indices (in presentation order) of its keyframes."""

    pts_s: np.ndarray
    keyframes: np.ndarray

    @property
    def gop(self) -> int | None:
        """The most common distance between keyframes (None with fewer than two)."""
        if len(self.keyframes) < 2:
            return None
        gaps, counts = np.unique(np.diff(self.keyframes), return_counts=True)
        return int(gaps[np.argmax(counts)])


def frames_of(processes: Processes, ffprobe: str, path: str) -> Frames:
    """The frames of the first video stream of `path`, from its packets (ffprobe; one pass over the index, no
    decoding).

    Raises:
        TranscodeError: ffprobe failed or the file has no video packet with a timestamp.
    """
    lines: list[str] = []
    code, errors = processes.run([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                                  "packet=pts_time,flags", "-of", "csv=p=0", path], lines.append)
    if code != 0:
        raise TranscodeError(f"ffprobe cannot read {path}: {_tail(errors)}")
    pts, key = [], []
    for line in lines:
        time_s, _, flags = line.partition(",")
        if time_s and time_s != "N/A":
            pts.append(float(time_s))
            key.append("K" in flags)
    if not pts:
        raise TranscodeError(f"{path} has no video frames with timestamps.")
    order = np.argsort(pts, kind="stable")
    return Frames(np.asarray(pts, dtype=np.float64)[order], np.flatnonzero(np.asarray(key)[order]))


PSNR_LINE = re.compile(r"PSNR .*average:(\S+) min:(\S+)")


def psnr(processes: Processes, ffmpeg: str, new: str, old: str, pix_fmt: str) -> tuple[float, float]:
    """(average, minimum) PSNR in dB of the frames of `new` against those of `old`, frame by frame in presentation
    order, both in `pix_fmt` (FFmpeg's psnr filter: Y, U and V weighted by their sizes; inf where identical).

    Raises:
        TranscodeError: FFmpeg failed or printed no PSNR.
    """
    graph = f"[0:v]format={pix_fmt}[new];[1:v]format={pix_fmt}[old];[new][old]psnr"
    code, errors = processes.run([ffmpeg, "-hide_banner", "-nostdin", "-nostats", "-i", new, "-i", old,
                                  "-lavfi", graph, "-f", "null", "-"])
    found = PSNR_LINE.findall(errors)
    if code != 0 or not found:
        raise TranscodeError(f"ffmpeg could not compare {new} with {old}: {_tail(errors)}")
    average, minimum = found[-1]
    return float(average), float(minimum)


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:]) or "(no message)"
