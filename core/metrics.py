"""The benchmark's statistics, as pure functions (the field names follow LeRobot's streaming benchmark)."""

import numpy as np


def sample_latency_ms(arrivals_s: list[float], start_s: float, batch_size: int) -> dict[str, float]:
    """Per-sample latency percentiles: each batch's inter-arrival gap divided by its size, in ms.

    Returns:
        `{"p50_sample_latency_ms", "p95_sample_latency_ms", "p99_sample_latency_ms"}` (NaN when empty).
    """
    gaps = np.diff(np.asarray([start_s, *arrivals_s])) / batch_size * 1e3
    names = ("p50_sample_latency_ms", "p95_sample_latency_ms", "p99_sample_latency_ms")
    if not len(gaps):
        return dict.fromkeys(names, float("nan"))
    return {n: round(float(np.percentile(gaps, q)), 3) for n, q in zip(names, (50, 95, 99), strict=True)}


def distinct_episode_fraction(episode_index: np.ndarray) -> float:
    """Shuffle randomness of one batch: distinct episodes in it / batch size (1.0: all from different
    episodes)."""
    return len(np.unique(episode_index)) / len(episode_index)


def ideal_distinct_fraction(lengths: list[int], batch_size: int) -> float:
    """The expected `distinct_episode_fraction` when every sample of a batch is drawn independently and
    uniformly over all frames: sum over episodes of P(episode appears) / batch size. A loader's shuffle
    cannot beat this on average; a map loader with a full shuffle gets close to it."""
    p = np.asarray(lengths, dtype=np.float64) / float(sum(lengths))
    return float((1 - (1 - p) ** batch_size).sum() / batch_size)
