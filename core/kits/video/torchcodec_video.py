"""torchcodec, as dl's built-in decoders (`cpu`, `nvdec`) use it: open a file with the right seek mode, decode
frames by timestamp (LeRobot's frame choice) or as a run in order, and say what went wrong in words."""

import os
import re

import numpy as np
import torch

from ...contracts.decoder import DecodedFrames, Decoder, FrameRequest
from ...contracts.errors import DlError, VideoDecodeError
from ...contracts.source import Source
from ..mp4_index import Mp4IndexError, SampleIndex, read_index
from ..remote.views import CachedView
from .depth_video import DepthStream

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


def leading_pictures(index: SampleIndex) -> bool:
    """Whether a track has leading pictures: a sample that follows a keyframe in decode order but is shown before
    it (an open GOP: HEVC's RASL pictures after a CRA keyframe, x265's default, and what LeRobot 0.6's lossless
    12-bit depth streams hold at every keyframe with `g=2`; H.264 with x264's `open-gop`). After a seek to that
    keyframe FFmpeg drops those pictures, so torchcodec's approximate seek to one of them returns the next frame
    (measured: 58 of 120 frames of such a 12-bit stream, 7 of 120 of an 8-bit HEVC with a 30-frame GOP); its exact
    mode seeks by the scanned presentation times and is right.

    Args:
        index: the track's samples in decode order (`dl.kits.mp4_index.read_index`).
    """
    if not len(index.pts):
        return False
    last_key = np.maximum.accumulate(np.where(index.keyframes, np.arange(len(index.pts)), 0))
    return bool((index.pts < index.pts[last_key]).any())


def _index_of(video) -> SampleIndex:
    """The mp4 index of what `Source.video_input` gave: a local path, or a seekable file object (closed after).

    Raises:
        Mp4IndexError: not an MP4 `dl.kits.mp4_index` indexes.
    """
    if isinstance(video, str | os.PathLike):
        with open(video, "rb") as f:
            return _index_of(f)

    def read(start: int, end: int) -> bytes:
        video.seek(start)
        parts, left = [], end - start
        while left > 0:  # a raw file object (a remote source's view) may return less than asked
            part = video.read(left)
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)

    try:
        return read_index(read, video.seek(0, os.SEEK_END))
    finally:
        video.close()


def approximate_is_right(video, meta) -> bool:
    """Whether torchcodec's approximate seek mode decodes the right frame at every position of a stream: its
    header is trustworthy (`header_trustworthy`) and its mp4 index shows no leading pictures (`leading_pictures`).
    A file the index reader cannot read (fragmented MP4, Matroska) is not proven right.

    Args:
        video: what `Source.video_input` gave for the file (a path or a seekable file object).
        meta: the torchcodec `VideoStreamMetadata` of the file opened in approximate mode.
    """
    if not header_trustworthy(meta):
        return False
    try:
        return not leading_pictures(_index_of(video))
    except (Mp4IndexError, OSError):
        return False


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
    proves the fast mode right for this file (a trustworthy header, no open GOPs in its mp4 index). With `resize`
    (height, width), every frame is scaled inside the decoder by torchcodec's `Resize` transform (bilinear, with
    antialiasing, as torchvision's `Resize`), in FFmpeg's filter graph: no full-size frame reaches Python.

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
        if seek_mode == "auto" and not approximate_is_right(source.video_input(path), decoder.metadata):
            decoder = create("exact")
    except (RuntimeError, ValueError, OSError) as exc:
        raise VideoDecodeError(f"cannot open video {source.url}/{path}: {reason(exc)}") from exc
    return decoder


def used_seek_mode(decoder) -> str:
    """The seek mode an `open_video` decoder runs in: "approximate" or "exact"."""
    return "exact" if decoder.metadata.num_frames_from_content is not None else "approximate"


def decode_frames(decoder, source: Source, path: str, timestamps: list[float], run: bool) -> DecodedFrames:
    """The frames of `decoder` shown at `timestamps` (s): frame round(t x average_fps), LeRobot's choice. With
    `run` and consecutive frames, one seek then in order (`get_frames_in_range`), else `get_frames_at`.

    Raises:
        VideoDecodeError: a timestamp outside the stream, or a decode failure (naming the file).
    """
    meta = decoder.metadata
    indices = [round(t * meta.average_fps) for t in timestamps]
    if max(indices) >= meta.num_frames or min(indices) < 0:
        raise VideoDecodeError(
            f"{source.url}/{path} has {meta.num_frames} frames ({meta.duration_seconds:.3f} s); "
            f"timestamps {timestamps} s fall outside it. The episode's from/to timestamps in "
            "meta/episodes do not match this video."
        )
    try:
        if run and indices == list(range(indices[0], indices[0] + len(indices))):
            batch = decoder.get_frames_in_range(indices[0], indices[-1] + 1)
        else:
            batch = decoder.get_frames_at(indices=indices)
    except RuntimeError as exc:
        at = (f"{timestamps[0]:.3f}-{timestamps[-1]:.3f} s ({len(timestamps)} frames)" if len(timestamps) > 3 else
              f"{[round(t, 6) for t in timestamps]} s")
        raise VideoDecodeError(f"decoding {source.url}/{path} at {at} failed: {reason(exc)}. The file's "
                               "payload may be corrupt: `dl validate` decodes every frame to find the damaged "
                               "files.") from exc
    return DecodedFrames(batch.data, batch.pts_seconds.to("cpu", torch.float64))


def stream_facts(decoder) -> dict:
    """`Decoder.probe` facts of an open decoder, with the seek mode it runs in."""
    meta = decoder.metadata
    return {"codec": meta.codec, "width": meta.width, "height": meta.height, "num_frames": meta.num_frames,
            "average_fps": meta.average_fps, "duration_s": meta.duration_seconds, "seek_mode": used_seek_mode(decoder)}


def decoder_bytes(decoder, frames: int) -> int:
    """An open decoder's memory estimate: `frames` decoded YUV 4:2:0 frames of its stream's size (measured
    ~1.8 MB for a 640x480 MPEG-4 or AV1 decoder with one thread: about 4 frames)."""
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
