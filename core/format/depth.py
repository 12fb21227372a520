"""Depth cameras as LeRobot 0.6.1 writes and serves them.

Its writer (`DepthEncoderConfig`) quantizes each depth map to 12-bit codes, logarithmically by default, between
`depth_min` and `depth_max` (metres) with a pre-log `shift`, and stores them in a lossless `gray12le` HEVC stream;
the feature's `info` records `video.depth_min`, `video.depth_max`, `video.shift`, `video.use_log` and
`is_depth_map: true` (LeRobot 0.4 wrote `video.is_depth_map`). Its reader decodes the codes with PyAV and serves
`dequantize_depth(...)`: float32 `[1, H, W]` in millimetres (rounded to whole mm) or, with
`depth_output_unit="m"`, in metres, clamped to `[depth_min, depth_max]`. `dequantize` here is that computation,
operation for operation in float32, so the values are LeRobot's to the bit.
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..contracts.errors import DatasetFormatError
from .features import is_depth_map, video_info  # noqa: F401 - is_depth_map: the test for a depth camera

if TYPE_CHECKING:
    import torch

DEPTH_UNITS = ("mm", "m")
"""The units depth is served in (LeRobot's `depth_output_unit`); "mm" is LeRobot's default."""
DEPTH_QMAX = 4095
"""The largest 12-bit code (LeRobot's `DEPTH_QMAX`)."""
DEFAULTS = {"depth_min": 0.01, "depth_max": 10.0, "shift": 3.5, "use_log": True}
"""LeRobot 0.6.1's `DepthEncoderConfig` defaults (metres), used where the feature's `info` leaves a field out."""
_UINT16_MAX = 65535.0


@dataclass(frozen=True)
class DepthQuantizer:
    """A depth camera's 12-bit quantizer (all in metres).

    Attributes:
        depth_min: the depth of code 0.
        depth_max: the depth of code 4095.
        shift: the pre-log offset (log mode).
        use_log: logarithmic (True) or linear codes.
    """

    depth_min: float = DEFAULTS["depth_min"]
    depth_max: float = DEFAULTS["depth_max"]
    shift: float = DEFAULTS["shift"]
    use_log: bool = DEFAULTS["use_log"]

    @classmethod
    def of(cls, key: str, feature: dict) -> "DepthQuantizer":
        """The quantizer info.json records for depth camera `key` (LeRobot's defaults for the fields it leaves out).

        Raises:
            DatasetFormatError: a field that is not a number, `depth_max <= depth_min`, or (log mode)
                `depth_min + shift <= 0`; the message names the camera.
        """
        info, fields = video_info(feature), {}
        for name, default in DEFAULTS.items():
            value = info.get(f"video.{name}")
            fields[name] = default if value is None or value == {} else value  # {}: a merge of disagreeing writers
        numbers = ("depth_min", "depth_max", "shift")
        if not all(isinstance(fields[n], int | float) and not isinstance(fields[n], bool) and math.isfinite(fields[n])
                   for n in numbers) or not isinstance(fields["use_log"], bool):
            raise DatasetFormatError(f"meta/info.json: depth camera {key!r} has quantizer fields "
                                     f"{ {n: fields[n] for n in DEFAULTS} }; video.depth_min, video.depth_max and "
                                     "video.shift must be numbers (metres) and video.use_log true or false.")
        quantizer = cls(float(fields["depth_min"]), float(fields["depth_max"]), float(fields["shift"]),
                        fields["use_log"])
        if quantizer.depth_max <= quantizer.depth_min or (quantizer.use_log and
                                                          quantizer.depth_min + quantizer.shift <= 0):
            raise DatasetFormatError(f"meta/info.json: depth camera {key!r} has depth_min={quantizer.depth_min}, "
                                     f"depth_max={quantizer.depth_max}, shift={quantizer.shift}; LeRobot needs "
                                     "depth_min < depth_max and (log mode) depth_min + shift > 0.")
        return quantizer

    def dequantize(self, codes: "torch.Tensor", unit: str = "mm") -> "torch.Tensor":
        """Depth of 12-bit `codes` (any integer dtype, `[..., 1, H, W]`): float32 of the same shape, in `unit`
        ("mm": whole millimetres; "m": metres), clamped to `[depth_min, depth_max]`. LeRobot 0.6.1's
        `dequantize_depth` (its torch path), the same float32 operations in the same order.

        Raises:
            ValueError: `unit` not in DEPTH_UNITS.
        """
        import torch

        if unit not in DEPTH_UNITS:
            raise ValueError(f"depth unit must be one of {DEPTH_UNITS}, got {unit!r}")
        if self.use_log:
            low, high = math.log(self.depth_min + self.shift), math.log(self.depth_max + self.shift)
            scale, offset = (high - low) / DEPTH_QMAX, low
        else:
            scale, offset = (self.depth_max - self.depth_min) / DEPTH_QMAX, self.depth_min
        out = codes.to(dtype=torch.float32, copy=True)
        out.mul_(scale).add_(offset)
        if self.use_log:
            out.exp_().sub_(self.shift)
        out.clamp_(self.depth_min, self.depth_max)
        if unit == "m":
            return out
        return out.mul_(1000.0).round_().clamp_(0.0, _UINT16_MAX)

    def describe(self, unit: str = "mm") -> str:
        """In words, e.g. "depth in mm, 10-10000 mm, log codes"."""
        scale = 1000.0 if unit == "mm" else 1.0
        return (f"depth in {unit}, {self.depth_min * scale:g}-{self.depth_max * scale:g} {unit}, "
                f"{'log' if self.use_log else 'linear'} codes")
