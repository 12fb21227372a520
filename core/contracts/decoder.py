"""The decoder interface: decode the frames of one video file at a list of timestamps, in one call; a run of
consecutive frames in order; and several files' frames (a sample's cameras) in one call."""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .source import Source

if TYPE_CHECKING:
    import torch

    from .needs import DataLoaderNeeds


SHOWN_AFTER_S = 1e-5
"""A decoder asked for the frame at timestamp t decodes the frame shown at t + this (s): a frame's time computed in
another unit (or stored as float32) may round to just below the frame's presentation time."""


@dataclass
class DecodedFrames:
    """Frames decoded from one file.

    Attributes:
        data: uint8 `[N, C, H, W]`, RGB (on the decoder's device: the CPU, or the GPU for `nvdec`); for a depth
            request (`FrameRequest.depth`), int16 `[N, 1, H, W]` on the CPU, the stream's 12-bit codes.
        pts_s: float64 `[N]` on the CPU, each frame's presentation time in seconds (file timeline).
    """

    data: "torch.Tensor"
    pts_s: "torch.Tensor"


@dataclass(frozen=True)
class FrameRequest:
    """The frames of one file that `Decoder.decode` is asked for.

    Attributes:
        path: the video file, relative to the source root.
        timestamps: seconds on the file's timeline.
        run: True when `timestamps` are consecutive frames in increasing order (frames k, k+1, ..., k+n-1), which
            a decoder may decode in one pass after one seek (`Decoder.frames_in_run`).
        depth: the file is a depth camera's 12-bit stream (LeRobot 0.6's `gray12le` HEVC): its codes are asked for,
            not RGB pictures (`Decoder.depth_frames`).
    """

    path: str
    timestamps: tuple[float, ...]
    run: bool = False
    depth: bool = False


@runtime_checkable
class OpenDecoders(Protocol):
    """A decoder's cache of open files, one per process (`dl.kits.video.decoder_cache.DecoderCache` is one), as the
    host and the benchmark use it.

    Attributes:
        capacity: files kept open per process.
    """

    capacity: int

    def resize(self, capacity: int) -> None:
        """Keep at most `capacity` (>= 1) files open, closing the least recently used past it."""

    def clear(self) -> None:
        """Close every open file of this process."""

    def stats(self) -> dict:
        """Counters summed over processes: at least `hits`, `misses`, `evictions`, `open`, `capacity`."""

    def reset_stats(self) -> None:
        """Zero the hit, miss and eviction counters."""


class Decoder(ABC):
    """A video decoder plugin. Implementations keep open decoders in `cache` (an `OpenDecoders`, one LRU per
    process) and must be picklable, because DataLoader workers receive a copy.

    Attributes:
        name: the registered name.
        cache: the open files of this process.
        cache_size_chosen: True when the user chose how many files `cache` keeps open; the host then never
            changes it (it warns when a loader reads more files in turn, `dl.host.reconcile`). False: the
            decoder's default, which the host raises to what the loader reads in turn.
        resize: (height, width) in pixels every decoded frame is scaled to inside the decoder, or None: frames
            keep the stream's size (a mixture of datasets whose cameras differ in size needs one, `dl.mixture`).
    """

    name: str
    cache: OpenDecoders
    cache_size_chosen: bool = False
    resize: tuple[int, int] | None = None

    @abstractmethod
    def frames_at(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        """Decode the frames shown at `timestamps` (seconds, file timeline) of `path` (relative to the
        source root), all in one call. Frame k is the one whose index is round(t * average_fps), as
        LeRobot's torchcodec backend picks it; the caller checks the tolerance.

        Raises:
            VideoDecodeError: the file cannot be opened or a timestamp is past the stream's end.
        """

    @abstractmethod
    def probe(self, source: Source, path: str) -> dict:
        """Stream facts of `path`: `{"codec", "width", "height", "num_frames", "average_fps",
        "duration_s"}` (a decoder may add more, e.g. the `seek_mode` it would use)."""

    def frames_in_run(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        """Decode a run of consecutive frames: `timestamps` (seconds, file timeline) pick frames k, k+1, ...,
        k+n-1, in that order. The result is what `frames_at` gives for the same timestamps; a decoder that can
        seek once and then decode in order (the sequential decode the `pool` loader's chunks rely on, several
        times faster than a seek per frame) overrides this. Default: `frames_at`.

        Raises:
            VideoDecodeError: as `frames_at`.
        """
        return self.frames_at(source, path, timestamps)

    def depth_frames(self, source: Source, path: str, timestamps: list[float]) -> DecodedFrames:
        """Decode the frames of a depth camera's 12-bit stream nearest `timestamps` (seconds, file timeline), as
        their codes: int16 `[N, 1, H, W]` on the CPU, 0..4095 (the caller dequantizes them, `dl.format.depth`, and
        checks the tolerance). The built-in decoders read them with PyAV, as LeRobot 0.6.1 does
        (`dl.kits.video.depth_video`). Default: refused.

        Raises:
            DecoderUnavailableError: this decoder does not decode depth streams.
            VideoDecodeError: the file cannot be opened or decoded.
        """
        from .errors import DecoderUnavailableError

        raise DecoderUnavailableError(f"decoder {self.name} does not decode depth cameras ({path}); use the cpu "
                                      "decoder (--decoder cpu), or leave the depth camera out (features=...).")

    def decode_images(self, images: Sequence[bytes]) -> list["torch.Tensor"]:
        """Decode image features (PNG or JPEG files stored in the data parquet, dtype "image"), one tensor per image:
        `[C, H, W]` with C the image's bands (3 for RGB, 1 for grayscale, 4 with alpha), uint8 for 8-bit images,
        int32 for 16/32-bit ones (depth maps in millimetres, exact), float32 for float ones. Default: Pillow, the
        decoder LeRobot's `datasets.Image` uses, so the values are LeRobot's (before its division by 255).

        Raises:
            DatasetFormatError: bytes that are not an image Pillow reads.
        """
        return [decode_image(data) for data in images]

    def decode(self, source: Source, requests: Sequence[FrameRequest]) -> list[DecodedFrames]:
        """Decode several files' frames (e.g. every camera of one sample), one result per request, in order.
        A depth stream (`FrameRequest.depth`) goes to `depth_frames`, a run (`FrameRequest.run`) to `frames_in_run`,
        anything else to `frames_at`. Default: one request
        after another; a decoder may decode the files concurrently where that is faster (`cpu` does with
        `camera_threads`).

        Raises:
            VideoDecodeError: as `frames_at`.
        """
        return [(self.depth_frames if r.depth else self.frames_in_run if r.run else self.frames_at)(
            source, r.path, list(r.timestamps)) for r in requests]

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What this decoder needs of the DataLoader (e.g. `spawn` workers for a CUDA decoder); nothing by
        default. See `dl.dataloader.build`."""
        from .needs import DataLoaderNeeds

        return DataLoaderNeeds()


def decode_image(data: bytes) -> "torch.Tensor":
    """One PNG/JPEG file's pixels with Pillow (`Decoder.decode_images`): uint8 `[C, H, W]` (bilevel images as 0/255
    grayscale), int32 `[1, H, W]` for 16/32-bit integer images (LeRobot's `ToTensor` gives int16 there, wrapping
    values past 32767), float32 `[1, H, W]` for float images; channels-last memory, as decoded video frames.

    Raises:
        DatasetFormatError: not an image Pillow can read.
    """
    import io

    import numpy as np
    import torch
    from PIL import Image, UnidentifiedImageError

    from .errors import DatasetFormatError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.mode == "1":
                image = image.convert("L")
            pixels = np.array(image)  # a writable copy: torch tensors must not alias Pillow's buffer
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        head = bytes(data[:8])
        raise DatasetFormatError(f"an image of {len(data)} bytes starting {head!r} does not decode ({exc}); a PNG "
                                 "starts with b'\\x89PNG', a JPEG with b'\\xff\\xd8'.") from None
    if pixels.dtype in (np.uint16, np.int16, np.uint32):
        pixels = pixels.astype(np.int32)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    return torch.from_numpy(pixels).permute(2, 0, 1)


CODEC_ALIASES = {"libsvtav1": "av1", "libaom-av1": "av1", "libdav1d": "av1", "h265": "hevc", "libx265": "hevc",
                 "libx264": "h264", "avc": "h264", "avc1": "h264", "mp4v": "mpeg4"}
"""info.json codec names (encoder or FourCC spellings) mapped to FFmpeg's stream codec names."""


def codec_matches(claimed: str, stream: str) -> bool:
    """Whether an info.json `video.codec` names the same codec as FFmpeg's stream codec name."""
    return CODEC_ALIASES.get(claimed, claimed) == stream
