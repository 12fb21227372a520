"""A mixture's normalization stats: each member's `meta/stats.json` under the mixture's key names, and their
aggregate as LeRobot aggregates the stats of several datasets (`lerobot.datasets.compute_stats.aggregate_stats`)."""

from collections.abc import Iterator, Mapping

import numpy as np

QUANTILE_PREFIX = "q"
"""LeRobot's quantile stats are `q01`, `q10`, `q50`, `q90`, `q99`: aggregated as count-weighted means, as it does."""


def renamed_stats(stats: dict, rename: dict[str, str]) -> dict:
    """`stats` (a `meta/stats.json` document: `{feature: {"mean": ..., ...}}`) with its feature keys renamed."""
    return {rename.get(key, key): value for key, value in stats.items()}


def aggregate_stats(stats: list[dict], frames: list[int], weights: list[float] | None = None) -> dict:
    """The stats of several datasets' features as one, by LeRobot's rules: every feature any dataset has; per
    feature, `min` and `max` element-wise, `mean` weighted, `std` from the weighted parallel variance (each dataset's
    variance plus its squared distance to the overall mean), quantiles as weighted means, and `count` the sum of the
    datasets' counts. Values are nested lists, as `meta/stats.json` holds them.

    Args:
        stats: per dataset, its stats document.
        frames: per dataset, its frames: its weight for a feature without a `count`.
        weights: per dataset, its weight (e.g. its share of a mixture's samples); None: each feature's own `count`,
            as LeRobot weighs them.
    """
    out = {}
    for key in dict.fromkeys(k for s in stats for k in s):
        entries, by = [], []
        for i, document in enumerate(stats):
            if key in document:
                entries.append(document[key])
                by.append(weights[i] if weights is not None else float(np.sum(document[key].get("count", frames[i]))))
        out[key] = _aggregate_feature(entries, np.asarray(by, dtype=np.float64))
    return out


def _aggregate_feature(entries: list[dict], weights: np.ndarray) -> dict:
    share = weights / weights.sum()
    names = [n for n in entries[0] if all(n in e for e in entries)]
    arrays = {n: [np.asarray(e[n], dtype=np.float64) for e in entries] for n in names}

    def weighted(values: list[np.ndarray]) -> np.ndarray:
        return sum(s * v for s, v in zip(share, values, strict=True))

    out = {}
    if "mean" in arrays:
        mean = weighted(arrays["mean"])
        out["mean"] = mean
        if "std" in arrays:
            out["std"] = np.sqrt(weighted([s**2 + (m - mean) ** 2
                                           for s, m in zip(arrays["std"], arrays["mean"], strict=True)]))
    for name, reduce in (("min", np.minimum.reduce), ("max", np.maximum.reduce)):
        if name in arrays:
            out[name] = reduce(arrays[name])
    for name in names:
        if name.startswith(QUANTILE_PREFIX) and name[1:].isdigit():
            out[name] = weighted(arrays[name])
    if "count" in arrays:
        out["count"] = np.sum(arrays["count"], axis=0).astype(np.int64)
    return {name: out[name].tolist() for name in names if name in out}


class MixtureStats(Mapping):
    """`mixture.stats`: each member's normalization stats by member name (its `meta/stats.json`, keys as the mixture
    serves them), and `aggregated()`.

    Args:
        by_member: member name -> its renamed stats.
        frames: per member, its frames (its weight for a feature whose stats have no `count`).
        shares: per member, its share of the mixture's samples (its weight).
    """

    def __init__(self, by_member: dict[str, dict], frames: list[int], shares: list[float]):
        self._by_member, self._frames, self._shares = by_member, frames, shares

    def __getitem__(self, name: str) -> dict:
        return self._by_member[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_member)

    def __len__(self) -> int:
        return len(self._by_member)

    def aggregated(self, weighted: bool = False) -> dict:
        """The members' stats as one (`aggregate_stats`): weighed by their counts, as LeRobot aggregates datasets
        (what their concatenation holds), or with `weighted` by their share of the mixture's samples (what a policy
        trained on the mixture sees)."""
        return aggregate_stats(list(self._by_member.values()), self._frames, self._shares if weighted else None)
