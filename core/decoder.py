"""The decoder interface: decode the frames of one video file at a list of timestamps, in one call."""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .decoder_cache import DecoderCache
from .source import Source

if TYPE_CHECKING:
    import torch

    from .dataloader import DataLoaderNeeds


@dataclass
class DecodedFrames:
    """Frames decoded from one file.

    Attributes:
        data: uint8 `[N, C, H, W]`, RGB.
        pts_s: float64 `[N]`, each frame's presentation time in seconds (file timeline).
    """

    data: "torch.Tensor"
    pts_s: "torch.Tensor"


class Decoder(ABC):
    """A video decoder plugin. Implementations keep open decoders in `cache` (a DecoderCache, one LRU per
    process) and must be picklable, because DataLoader workers receive a copy."""

    name: str
    cache: DecoderCache

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
        "duration_s"}`."""

    def dataloader_needs(self) -> "DataLoaderNeeds":
        """What this decoder needs of the DataLoader (e.g. `spawn` workers for a CUDA decoder); nothing by
        default. See `dl.dataloader`."""
        from .dataloader import DataLoaderNeeds

        return DataLoaderNeeds()


CODEC_ALIASES = {"libsvtav1": "av1", "libaom-av1": "av1", "libdav1d": "av1", "h265": "hevc", "libx265": "hevc",
                 "libx264": "h264", "avc": "h264", "avc1": "h264", "mp4v": "mpeg4"}
"""info.json codec names (encoder or FourCC spellings) mapped to FFmpeg's stream codec names."""


def codec_matches(claimed: str, stream: str) -> bool:
    """Whether an info.json `video.codec` names the same codec as FFmpeg's stream codec name."""
    return CODEC_ALIASES.get(claimed, claimed) == stream
