"""`delta_timestamps` as frame offsets, with LeRobot's clamping and padding at episode edges."""

import numpy as np

from ..contracts.errors import DlError


def delta_indices(delta_timestamps: dict[str, list[float]], fps: int, known_keys: list[str],
                  tolerance_s: float) -> dict[str, np.ndarray]:
    """Convert `{key: [offsets in s]}` to `{key: int64 offsets in frames}` (round(offset * fps)).

    Raises:
        DlError: an unknown key, an empty offset list, a NaN or infinite offset, or an offset farther than
            `tolerance_s` from a multiple of 1/fps (LeRobot's `check_delta_timestamps`).
    """
    out = {}
    for key, offsets in delta_timestamps.items():
        if key not in known_keys:
            raise DlError(f"delta_timestamps key {key!r} is not a feature of this dataset; features: "
                          f"{', '.join(known_keys)}.")
        if not offsets:
            raise DlError(f"delta_timestamps[{key!r}] is empty; give at least one offset in seconds.")
        frames = np.asarray(offsets, dtype=np.float64) * fps
        if not np.isfinite(frames).all():
            raise DlError(f"delta_timestamps[{key!r}] has {[o for o in offsets if not np.isfinite(o)]}: offsets are "
                          "finite numbers of seconds, e.g. [-0.1, 0.0].")
        off = np.abs(frames - np.round(frames)) / fps
        if (off > tolerance_s).any():
            bad = [o for o, x in zip(offsets, off, strict=True) if x > tolerance_s]
            raise DlError(f"delta_timestamps[{key!r}] offsets {bad} are not multiples of 1/fps = "
                          f"{1 / fps:.6f} s (tolerance {tolerance_s} s).")
        out[key] = np.round(frames).astype(np.int64)
    return out


def window(row: int, offsets: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a window around `row` in an episode of `length` frames.

    Returns:
        (rows int64 [T], is_pad bool [T]): rows clamped to [0, length - 1]; is_pad marks the offsets that
        fell outside the episode (their row repeats the edge frame), as LeRobot's `LeRobotDataset` does.
    """
    target = row + offsets
    return np.clip(target, 0, length - 1), (target < 0) | (target >= length)
