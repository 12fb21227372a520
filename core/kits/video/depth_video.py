"""Depth-map streams (LeRobot 0.6's depth cameras: 12-bit codes in lossless `gray12le` HEVC) decoded with PyAV as
LeRobot 0.6.1 decodes them (`lerobot.datasets.video_utils.decode_video_frames_pyav` with `is_depth=True`): the
12-bit codes kept as they are, since torchcodec converts every frame to 8-bit RGB.

A request seeks to the keyframe at or before its first timestamp and decodes forward in presentation order until
its last one; each timestamp gets the decoded frame nearest it, by the frames' own presentation times. An open GOP
needs one more step: FFmpeg's mp4 seek places keyframes by decode time, which B-frames put before their
presentation time, so a seek to a leading B-frame (shown before the keyframe it follows in decode order, as in
every GOP of LeRobot's depth streams) lands on that keyframe, and the decoder drops the B-frame. When the first frame
decoded comes after the first timestamp, the seek starts 2, 4, 8... frames earlier until it does (LeRobot 0.6.1
seeks once and serves a later frame there, or fails its tolerance check: with a GOP of 4 frames, 1 in 4 frames)."""

from fractions import Fraction

import numpy as np
import torch

from ...contracts.decoder import DecodedFrames
from ...contracts.errors import DecoderUnavailableError, VideoDecodeError
from ...contracts.source import Source

DEPTH_PIX_FMT = "gray12le"
"""The pixel format the codes are read in (LeRobot's `DEFAULT_DEPTH_PIX_FMT`): one 16-bit plane holding 0..4095."""


def _av():
    try:
        import av
    except ImportError as exc:  # declared in pyproject; a broken install names it
        raise DecoderUnavailableError(f"decoding depth cameras needs PyAV (`pip install av`): {exc}") from None
    return av


class DepthStream:
    """One open depth video: a PyAV container on `source.video_input(path)` and its first video stream.

    Attributes:
        metadata: `width` and `height` of the stream (for `dl.kits.video.decoder_cache.DecoderCache`'s size
            estimate, as a torchcodec decoder's metadata).

    Raises:
        VideoDecodeError: (at construction) the file cannot be opened or holds no video stream.
    """

    def __init__(self, source: Source, path: str):
        av = _av()
        self.where = f"{source.url}/{path}"
        try:
            self.container = av.open(source.video_input(path))
            self.stream = self.container.streams.video[0]
            # no FFmpeg threads: a forked DataLoader worker that inherits this decoder would hang freeing threads it
            # does not have (libavcodec's slice threads); parallelism comes from workers, as with `cpu`'s num_threads=1
            self.stream.codec_context.thread_count = 1
        except (av.FFmpegError, OSError, IndexError) as exc:
            raise VideoDecodeError(f"cannot open depth video {self.where}: {exc}") from exc
        self.metadata = self.stream.codec_context

    def frames(self, timestamps: list[float]) -> DecodedFrames:
        """The frames nearest `timestamps` (s, file timeline): int16 codes `[N, 1, H, W]` and their presentation
        times; the caller checks the tolerance.

        Raises:
            VideoDecodeError: nothing decodes in the span, or FFmpeg reports a damaged payload.
        """
        av = _av()
        first, last = min(timestamps), max(timestamps)
        period = 1.0 / float(self.stream.average_rate or self.stream.base_rate or 30)
        back = 0.0
        while True:
            try:
                pts, codes = self._decode(first - back, last)
            except av.FFmpegError as exc:
                raise VideoDecodeError(f"decoding depth video {self.where} at {first:.3f}-{last:.3f} s failed ({exc})."
                                       " `dl validate` decodes every frame to find the damaged files.") from exc
            if (pts and pts[0] <= first + period / 2) or first - back <= 0:
                break
            back = max(2 * back, 2 * period)  # landed on a keyframe whose leading B-frames it drops: start earlier
        if not pts:
            raise VideoDecodeError(f"no frame of depth video {self.where} decodes in {first:.3f}-{last:.3f} s; the "
                                   "episode's from/to timestamps in meta/episodes do not match this video.")
        have = np.asarray(pts)
        which = np.abs(np.asarray(timestamps, dtype=np.float64)[:, None] - have[None, :]).argmin(1)
        data = torch.from_numpy(np.stack([codes[i] for i in which]).astype(np.int16)[:, None])
        return DecodedFrames(data, torch.from_numpy(have[which]))

    def _decode(self, start: float, last: float) -> tuple[list[float], list[np.ndarray]]:
        """Seek to the keyframe at or before `start` (s; LeRobot's seek, one tick before) and decode on until a frame
        at or past `last`: the frames' presentation times and codes."""
        base: Fraction = self.stream.time_base
        pts, codes = [], []
        self.container.seek(max(round(start / base) - 1, 0), backward=True, any_frame=False, stream=self.stream)
        for frame in self.container.decode(self.stream):
            if frame.pts is None:
                continue
            pts.append(float(frame.pts * base))
            codes.append(frame.to_ndarray(format=DEPTH_PIX_FMT))
            if pts[-1] >= last:
                break
        return pts, codes
