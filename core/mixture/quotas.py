"""How much of each member a mixture epoch reads: the members' weights (by frames, by episodes, or as given), the
samples each member gives one mixture epoch (its quota), and the member's own epochs those samples come from.

By default an epoch reads every member whole at least once (`epoch_quotas`). A member whose quota exceeds its frames
is read more than once per mixture epoch (oversampled): its own epoch restarts, reshuffled, as often as the quota
needs, and the last one may be read only in part; a member whose quota is below its frames (a `samples_per_epoch`
shorter than that) is read in part (undersampled). The member's epochs are numbered on across mixture epochs:
mixture epoch `e` reads member epochs `e * k .. e * k + k - 1`, where `k` is how many it starts per mixture epoch, so
each of its epochs is read by one mixture epoch only and shuffled anew.
"""

from collections.abc import Sequence

import numpy as np

from ..contracts.errors import DlError

WEIGHTINGS = ("frames", "episodes")
"""Weights the mixture derives from its members. "frames": in proportion to their frames, so every frame is equally
likely, as if the datasets were concatenated (LeRobot's `MultiLeRobotDataset`, torch's `ConcatDataset`); with the
default epoch every frame of every member comes once. "episodes": in proportion to their episodes, so a dataset of
many short episodes does not outweigh one of a few long ones."""

WEIGHT_SCALE = 2**32
"""Explicit weights are apportioned as integers of this resolution (exact, the same on every platform)."""


def apportion(total: int, shares: Sequence[int]) -> list[int]:
    """Split `total` into integers in proportion to the non-negative integer `shares`, the largest remainders
    first (ties: the lower index), so they sum to `total` (Hamilton's method, in exact integer arithmetic). When
    `total <= sum(shares)`, no part exceeds its share.

    Raises:
        ValueError: `total` > 0 with every share 0, or a negative value.
    """
    shares = [int(s) for s in shares]
    whole = sum(shares)
    if total < 0 or any(s < 0 for s in shares):
        raise ValueError(f"apportion needs non-negative values, got total {total} and shares {shares}")
    if total == 0:
        return [0] * len(shares)
    if whole == 0:
        raise ValueError(f"cannot apportion {total} over shares that are all 0")
    parts = [total * s // whole for s in shares]
    remainders = [total * s % whole for s in shares]
    for i in sorted(range(len(shares)), key=lambda i: -remainders[i])[:total - sum(parts)]:
        parts[i] += 1
    return parts


def member_weights(weights: str | Sequence[float], frames: Sequence[int], episodes: Sequence[int],
                   names: Sequence[str]) -> list[float]:
    """The members' weights, summing to 1: from `WEIGHTINGS` or as given (any positive numbers, normalised).

    Raises:
        DlError: an unknown weighting, or given weights that are not one positive finite number per member.
    """
    if isinstance(weights, str):
        if weights not in WEIGHTINGS:
            raise DlError(f"mixture weights {weights!r}: give one weight per member, or one of "
                          f"{', '.join(WEIGHTINGS)}.")
        base = np.asarray(frames if weights == "frames" else episodes, dtype=np.float64)
    else:
        base = np.asarray(list(weights), dtype=np.float64)
        if base.shape != (len(names),):
            raise DlError(f"mixture weights {list(weights)}: give one weight per member ({len(names)}: "
                          f"{', '.join(names)}).")
        bad = [f"{n}={w}" for n, w in zip(names, base, strict=True) if not (np.isfinite(w) and w > 0)]
        if bad:
            raise DlError(f"mixture weights must be positive numbers; got {', '.join(bad)}. Leave a member out "
                          "instead of giving it weight 0.")
    return (base / base.sum()).tolist()


def epoch_quotas(weights: Sequence[float], samples_per_epoch: int | None, frames: Sequence[int],
                 exact_frames: bool) -> list[int]:
    """The samples each member gives one mixture epoch.

    With `samples_per_epoch` None, every member is read whole at least once (HF datasets' `interleave_datasets`
    stopping strategy "all_exhausted"): the member with the most frames per unit of weight exactly once, each other
    member `weight_m / weight_that x its frames` times its own frames' worth, rounded (never below its frames); with
    weights by frames (`exact_frames`), every member exactly once. Otherwise `samples_per_epoch` apportioned by the
    weights (exactly by the frames with `exact_frames`), so a member whose quota is below its frames is read in part.
    """
    if samples_per_epoch is None:
        if exact_frames:
            return list(frames)
        limit = max(range(len(frames)), key=lambda m: (frames[m] / weights[m], -m))
        return [frames[m] if m == limit else round(frames[limit] * weights[m] / weights[limit])
                for m in range(len(frames))]
    shares = frames if exact_frames else [round(w * WEIGHT_SCALE) for w in weights]
    return apportion(samples_per_epoch, shares)


def pass_quotas(quota: int, frames: int) -> list[int]:
    """What each of a member's epochs gives one mixture epoch, in order: whole epochs of `frames`, then the rest
    (a partial epoch), e.g. `pass_quotas(25, 10) == [10, 10, 5]`."""
    whole, rest = divmod(quota, frames)
    return [frames] * whole + ([rest] if rest else [])


def member_epoch(mixture_epoch: int, passes_per_epoch: int, index: int) -> int:
    """The member's own epoch of its `index`-th pass in `mixture_epoch`, numbered on across mixture epochs."""
    return mixture_epoch * passes_per_epoch + index
