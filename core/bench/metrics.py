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
