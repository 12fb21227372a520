"""torchcodec, as dl's built-in decoders (`cpu`, `nvdec`) use it: open a file with the right seek mode, decode
frames by timestamp (LeRobot's frame choice) or as a run in order, and say what went wrong in words."""

import re

import torch

from ...contracts.decoder import SHOWN_AFTER_S, DecodedFrames, Decoder, FrameRequest
from ...contracts.errors import DlError, VideoDecodeError
from ...contracts.source import Source
from ..remote.views import CachedView
from .depth_video import DepthStream
from .frame_grid import approximate_places_frames

SEEK_MODES = ("auto", "approximate", "exact")


def header_trustworthy(meta) -> bool:
    """Whether a stream's container header can place frames by index without a scan (torchcodec's
    "approximate" seek mode): frame count, average frame rate and duration all given by the header, the
    count equal to duration x rate within one frame (a constant frame rate), and the stream starting at 0.
    Matroska/WebM headers carry no frame count; variable-rate or edited streams fail the consistency check.

    Args:
        meta: a torchcodec `VideoStreamMetadata`.
    """
    frames, fps, duration = meta.num_frames_from_header, meta.average_fps_from_header, meta.duration_seconds_from_header
    if not frames or not fps or not duration:
        return False
    if abs(frames - duration * fps) > 1:
        return False
    return not meta.begin_stream_seconds_from_header


def approximate_is_right(source: Source, path: str, meta) -> bool:
    """Whether "approximate" seeking decodes the right frames of `path`: its MP4 index shows its frames on the
    header's rate grid and no open GOPs (`dl.kits.video.frame_grid.approximate_places_frames`), or, for a file without
    an index this reader can read, its header is trustworthy (`header_trustworthy`)."""
    right = approximate_places_frames(source, path, meta)
    return header_trustworthy(meta) if right is None else right


def checked_resize(value, who: str) -> tuple[int, int] | None:
    """A decoder's `resize` option as (height, width), or None.

    Raises:
        DlError: not two integers >= 1; the message names `who` (the decoder) and the form it takes.
    """
    if value is None:
        return None
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)):
        raise DlError(f"{who}: resize must be [height, width] in pixels (two integers >= 1), got {value!r}.")
    return int(value[0]), int(value[1])


def open_video(source: Source, path: str, *, seek_mode: str, num_threads: int = 1, device: str = "cpu",
               resize: tuple[int, int] | None = None):
    """A torchcodec `VideoDecoder` on `source.video_input(path)` (a remote source's `CachedView` with its `fills`
    on: torchcodec 0.13's file-object reader, `AVIOFileLikeContext::read`, calls `read` until its 64 KiB buffer is
    full or a read returns no bytes, so the view may end a fill at bytes not downloaded yet). `seek_mode` "auto"
    opens in "approximate" mode and reopens in "exact" mode (one scan of the file) unless `approximate_is_right`
    proves the fast mode right for this file (frames on the header's grid, no open GOPs in its MP4 index). With
    `resize` (height, width), every frame is scaled inside the decoder by torchcodec's `Resize` transform (bilinear,
    with antialiasing, as torchvision's `Resize`), in FFmpeg's filter graph: no full-size frame reaches Python.

    Raises:
        VideoDecodeError: the file cannot be opened; the message names it and torchcodec's reason.
    """
    from torchcodec.decoders import VideoDecoder

    transforms = None
    if resize is not None:
        from torchcodec.transforms import Resize

        transforms = [Resize(size=resize)]

    def create(mode: str):
        video = source.video_input(path)
        if isinstance(video, CachedView):
            video.fills = True  # torchcodec reads on after a short read until its buffer is full or a read is empty
        return VideoDecoder(video, seek_mode=mode, num_ffmpeg_threads=num_threads, device=device,
                            transforms=transforms)

    try:
        decoder = create("approximate" if seek_mode == "auto" else seek_mode)
        if seek_mode == "auto" and not approximate_is_right(source, path, decoder.metadata):
            decoder = create("exact")
    except (RuntimeError, ValueError, OSError) as exc:
        raise VideoDecodeError(f"cannot open video {source.url}/{path}: {reason(exc)}") from exc
    return decoder


def used_seek_mode(decoder) -> str:
    """The seek mode an `open_video` decoder runs in: "approximate" or "exact"."""
    return "exact" if decoder.metadata.num_frames_from_content is not None else "approximate"



def decode_frames(decoder, source: Source, path: str, timestamps: list[float], run: bool) -> DecodedFrames:
    """The frames of `decoder` shown at `timestamps` (s, + `SHOWN_AFTER_S`), by presentation time
    (`get_frames_played_at`), whatever the stream's frame rate: the loaders ask for the times of the frames they
    picked from the file's index (`dl.format.frame_times`). With `run` (consecutive frames), one seek then in
    order (`get_frames_played_in_range`).

    Raises:
        VideoDecodeError: a timestamp outside the stream, or a decode failure (naming the file).
    """
    meta = decoder.metadata
    times = [t + SHOWN_AFTER_S for t in timestamps]
    begin = meta.begin_stream_seconds or 0.0
    end = meta.end_stream_seconds if meta.end_stream_seconds is not None else meta.duration_seconds
    if min(timestamps) < min(begin, 0.0) or (end is not None and max(timestamps) > end):
        raise VideoDecodeError(
            f"{source.url}/{path} has {meta.num_frames} frames ({meta.duration_seconds:.3f} s); "
            f"timestamps {timestamps} s fall outside it. The episode's from/to timestamps in "
            "meta/episodes do not match this video."
        )
    try:
        data = pts = None
        if run and len(times) > 1 and (end is None or times[-1] + SHOWN_AFTER_S <= end):
            batch = decoder.get_frames_played_in_range(times[0], times[-1] + SHOWN_AFTER_S)
            if len(batch.pts_seconds) == len(times):  # else not consecutive frames after all
                data, pts = batch.data, batch.pts_seconds
        if data is None:
            data, pts = _played_at(decoder, times, end)
    except (RuntimeError, IndexError) as exc:
        at = (f"{timestamps[0]:.3f}-{timestamps[-1]:.3f} s ({len(timestamps)} frames)" if len(timestamps) > 3 else
              f"{[round(t, 6) for t in timestamps]} s")
        raise VideoDecodeError(f"decoding {source.url}/{path} at {at} failed: {reason(exc)}. The file's "
                               "payload may be corrupt: `dl validate` decodes every frame to find the damaged "
                               "files.") from exc
    return DecodedFrames(data, pts.to("cpu", torch.float64))


def _played_at(decoder, times: list[float], end: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`get_frames_played_at(times)`, where a time at or past `end` (the stream's end as torchcodec counts it: the
    last frame's time when its duration is 0, as in variable-frame-rate files) takes the last frame."""
    late = [i for i, t in enumerate(times) if end is not None and t >= end]
    if not late:
        batch = decoder.get_frames_played_at(seconds=times)
        return batch.data, batch.pts_seconds
    last = decoder.get_frames_at(indices=[decoder.metadata.num_frames - 1])
    early = [i for i in range(len(times)) if i not in set(late)]
    data = last.data.expand(len(times), *last.data.shape[1:]).clone()
    pts = last.pts_seconds.expand(len(times)).clone()
    if early:
        batch = decoder.get_frames_played_at(seconds=[times[i] for i in early])
        data[early], pts[early] = batch.data, batch.pts_seconds
    return data, pts


def stream_facts(decoder) -> dict:
    """`Decoder.probe` facts of an open decoder, with the seek mode it runs in."""
    meta = decoder.metadata
    return {"codec": meta.codec, "width": meta.width, "height": meta.height, "num_frames": meta.num_frames,
            "average_fps": meta.average_fps, "duration_s": meta.duration_seconds, "seek_mode": used_seek_mode(decoder)}


def decoder_bytes(decoder, frames: int) -> int:
    """An open decoder's memory estimate: `frames` decoded YUV 4:2:0 frames of its stream's size (bytes).
    `benchmarks/results/internals.md` ("Decoders") has what an open decoder was measured to hold."""
    meta = decoder.metadata
    return int(frames * (meta.width or 0) * (meta.height or 0) * 3 // 2)


def reason(exc: Exception) -> str:
    """torchcodec's message without the C++ source location it starts with ("SingleStreamDecoder,
    /path/File.cpp:52, Could not open input file: ..." -> "Could not open input file: ...")."""
    return re.sub(r"^.*?\.cpp:\d+, ", "", str(exc), flags=re.S)


class TorchcodecDecoder(Decoder):
    """The part of a torchcodec-backed decoder plugin that does not depend on the device: open `VideoDecoder`s
    kept in `cache`, keyed by (source URL, path), and frames read through `decode_frames`; depth cameras' 12-bit
    streams read with PyAV on the CPU (`dl.kits.video.depth_video.DepthStream`, kept in `cache` too, keyed by
    (source URL, path, "depth")), as LeRobot 0.6.1 reads them. A subclass says how a file is opened (`_open`:
    device, threads, the checks it makes) and gives `probe`."""

    def _open(self, source: Source, path: str):
        """A torchcodec `VideoDecoder` for `path` (see `open_video`)."""
        raise NotImplementedError

    def _decoder(self, source: Source, path: str):
        return self.cache.get((source.url, path), lambda: self._open(source, path))

    def _frames(self, decoder, source: Source, path: str, timestamps: list[float], run: bool) -> DecodedFrames:
        """`decode_frames`; a decoder that fails is dropped from `cache`, never used again (`DecoderCache.discard`:
        after FFmpeg reported a corrupt payload, reusing its state crashed the process in 1 of 2 runs here)."""
        try:
            return decode_frames(decoder, source, path, timestamps, run)
        except VideoDecodeError:
            self.cache.discard((source.url, path))
            raise

    def _depth(self, source: Source, path: str) -> DepthStream:
        return self.cache.get((source.url, path, "depth"), lambda: DepthStream(source, path))

    def _opened(self, source: Source, request: FrameRequest):
        """The open decoder of `request`'s file: a `DepthStream` for a depth request, else a `VideoDecoder`."""
        return self._depth(source, request.path) if request.depth else self._decoder(source, request.path)

    def _request(self, opened, source: Source, request: FrameRequest) -> DecodedFrames:
        """`request` decoded by `opened` (`_opened`); a file that fails is dropped from `cache`."""
        if not request.depth:
            return self._frames(opened, source, request.path, list(request.timestamps), request.run)
        try:
            return opened.frames(list(request.timestamps))
        except VideoDecodeError:
            self.cache.discard((source.url, request.path, "depth"))
            raise

    def depth_frames(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        request = FrameRequest(path, tuple(timestamps), depth=True)
        return self._request(self._opened(source, request), source, request)

    def frames_at(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        return self._frames(self._decoder(source, path), source, path, timestamps, run=False)

    def frames_in_run(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        """One seek, then the frames in order (`get_frames_in_range`); not a run: as `frames_at`."""
        return self._frames(self._decoder(source, path), source, path, timestamps, run=True)
