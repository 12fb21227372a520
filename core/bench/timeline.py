"""What the benchmark records over time, beside its summary figures: samples delivered per second from
the first `iter()` of the DataLoader (warm-up included, so start-up, stalls and epoch rollovers show), and
which episodes each epoch's batches came from (so ranks can be checked for disjointness)."""

from collections import defaultdict


class Timeline:
    """Samples per `bin_s`-second bin, from `start` (perf_counter seconds).

    Args:
        start: when the DataLoader's `iter()` was called.
        bin_s: bin width in seconds.
    """

    def __init__(self, start: float, bin_s: float = 1.0):
        self.start, self.bin_s = start, bin_s
        self.samples: list[int] = []
        self.window_start_s: float | None = None
        self.last = start

    def add(self, now: float, samples: int) -> None:
        """A batch of `samples` arrived at `now`."""
        index = int((now - self.start) // self.bin_s)
        if index >= len(self.samples):
            self.samples.extend([0] * (index + 1 - len(self.samples)))
        self.samples[index] += samples
        self.last = max(self.last, now)

    def mark_window(self, now: float) -> None:
        """The steady window starts at `now` (earlier bins are warm-up)."""
        self.window_start_s = round(now - self.start, 3)

    def to_dict(self) -> dict:
        """`{"bin_s", "samples_per_bin", "last_bin_s", "window_start_s"}`: the result's
        `throughput_timeline`; the last bin covers only `last_bin_s` seconds (up to the last batch)."""
        last_bin_s = (self.last - self.start) - (len(self.samples) - 1) * self.bin_s if self.samples else 0.0
        return {"bin_s": self.bin_s, "samples_per_bin": list(self.samples), "last_bin_s": round(last_bin_s, 3),
                "window_start_s": self.window_start_s}


def rates(timeline: dict) -> list[float]:
    """samples/s per bin of a `throughput_timeline` (the partial last bin over the time it covers; left out
    when it covers less than a tenth of a bin)."""
    width, bins = timeline["bin_s"], list(timeline["samples_per_bin"])
    out = [n / width for n in bins[:-1]]
    last = timeline.get("last_bin_s", width)
    if bins and last >= 0.1 * width:
        out.append(bins[-1] / last)
    return out


class EpisodesSeen:
    """The episode indices each epoch's batches held (for `episodes_by_epoch` in a result)."""

    def __init__(self):
        self._seen: dict[int, set[int]] = defaultdict(set)

    def add(self, epoch: int, episode_index) -> None:
        """A batch of epoch `epoch`; `episode_index`: its int tensor [B]."""
        self._seen[epoch].update(int(e) for e in episode_index.unique().tolist())

    def to_dict(self) -> dict[str, list[int]]:
        """`{epoch: sorted episode indices}` (keys as strings: JSON)."""
        return {str(epoch): sorted(episodes) for epoch, episodes in sorted(self._seen.items())}


def rank_overlap(ranks: list[dict]) -> dict:
    """Per-rank disjointness of a multi-rank run, from each rank's `episodes_by_epoch`: the episodes each
    rank saw per epoch (mean over the window's epochs), and how many (epoch, episode) pairs more than one
    rank saw (0 for a loader that deals episodes to ranks, such as `pool`; the `map` loader deals frames,
    so its ranks share episodes).

    Returns:
        `{"episodes_per_rank": [...], "shared_episodes": n}`, or {} when a rank recorded none.
    """
    seen = [r.get("episodes_by_epoch") for r in ranks]
    if not all(seen):
        return {}
    owners: dict[tuple[str, int], int] = defaultdict(int)
    for by_epoch in seen:
        for epoch, episodes in by_epoch.items():
            for e in episodes:
                owners[(epoch, e)] += 1
    return {"episodes_per_rank": [round(sum(map(len, s.values())) / len(s), 1) for s in seen],
            "shared_episodes": sum(1 for n in owners.values() if n > 1)}


def sum_timelines(timelines: list[dict]) -> dict:
    """The bin-wise sum of several ranks' `throughput_timeline`s (same bin width; ranks start their
    DataLoaders together, at a barrier)."""
    bins = [t["samples_per_bin"] for t in timelines]
    total = [sum(b[i] for b in bins if i < len(b)) for i in range(max(map(len, bins), default=0))]
    starts = [t["window_start_s"] for t in timelines if t.get("window_start_s") is not None]
    last = min((t.get("last_bin_s", t["bin_s"]) for t in timelines if len(t["samples_per_bin"]) == len(total)),
               default=timelines[0]["bin_s"])
    return {"bin_s": timelines[0]["bin_s"], "samples_per_bin": total, "last_bin_s": last,
            "window_start_s": max(starts, default=None)}
