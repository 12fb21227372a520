"""`dl report`: many result files (any scheduler, any number of runs and ranks, local and cluster runs
mixed) collapsed into one comparison: one row per run, grouped by scenario, with the configuration
fields that differ between runs, and ratios against a baseline run."""

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..contracts.errors import DlError
from .results import flatten, merge_ranks

METRICS = ("samples_per_s", "decoded_frames_per_s", "peak_rss_gb", "distinct_episodes_per_batch",
           "first_batch_latency_s", "p95_sample_latency_ms")
"""The figures each row shows, in this order; `distinct_episodes_per_batch` is `shuffle_randomness_frac` in the unit
`dl run` shows it: "13.4 of 16" (the mean distinct episodes of a batch, of the batch size)."""

IGNORED_CONFIG = ("name", "out_dir", "metadata_snapshot", "scenario")
"""Config fields that never count as a difference (paths and names, or shown as the group)."""


@dataclass
class ReportRow:
    """One run: where its result came from, the result (ranks merged), and its flattened config."""

    label: str
    result: dict
    config: dict = field(default_factory=dict)

    @property
    def scenario(self) -> str:
        return self.result.get("config", {}).get("scenario") or "-"

    @property
    def dataset_root(self) -> str:
        """The root of the dataset the run measured (`config.root`, else `dataset.root`)."""
        return str(self.config.get("root") or (self.result.get("dataset") or {}).get("root"))

    def value(self, key: str):
        """A config field (dotted) or, failing that, a result field (dotted)."""
        if key in self.config:
            return self.config[key]
        return flatten(self.result).get(key)


def load_rows(paths: list[Path]) -> list[ReportRow]:
    """Every run in `paths` (result JSON files, or folders holding them, not recursively: `OUT_DIR/specs/`
    is skipped). A multi-rank run is its merged line; ranks whose merged line is missing are merged here.

    Raises:
        DlError: a path does not exist, or holds no result files.
    """
    files: list[Path] = []  # in the order given, then by name
    for path in map(Path, paths):
        if path.is_dir():
            files += sorted(path.glob("*.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise DlError(f"{path} does not exist: give result JSON files or the --out-dir folders of dl run.")
    merged: dict[tuple[Path, str], dict] = {}
    ranks: dict[tuple[Path, str], list[dict]] = {}
    for file in files:
        try:
            result = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(result, dict) or "status" not in result or "name" not in result:
            continue  # not a result (a spec, a submission)
        world = result.get("config", {}).get("world_size", 1)
        if world > 1 and "rank" in result and "ranks" not in result:
            base = result["name"].rsplit("-rank", 1)[0]
            ranks.setdefault((file.parent, base), []).append(result)
        else:
            merged[(file.parent, result["name"])] = result
    for key, found in ranks.items():
        if key not in merged:
            merged[key] = merge_ranks(key[1], sorted(found, key=lambda r: r["rank"]))
    if not merged:
        raise DlError(f"no dl result files in {', '.join(map(str, paths))}.")
    folders = list(dict.fromkeys(file.parent for file in files))
    rows = []
    for (folder, name), result in sorted(merged.items(), key=lambda kv: (folders.index(kv[0][0]), kv[0][1])):
        label = f"{folder.name}/{name}" if len(folders) > 1 else name
        config = {k: v for k, v in flatten(result.get("config", {})).items() if k not in IGNORED_CONFIG}
        rows.append(ReportRow(label, result, config))
    return rows


def dataset_names(rows: list[ReportRow]) -> dict[str, str]:
    """Each dataset root the rows measured (`ReportRow.dataset_root`) -> a short name: its folder's name, numbered
    where folders of the same name differ (`/a/default`, `/b/default` -> `default (1)`, `default (2)`)."""
    roots = list(dict.fromkeys(row.dataset_root for row in rows))
    folders = {root: root.removeprefix("file://").rstrip("/").rsplit("/", 1)[-1] or root for root in roots}
    names, seen = {}, {}
    for root, folder in folders.items():
        seen[folder] = seen.get(folder, 0) + 1
        names[root] = folder if list(folders.values()).count(folder) == 1 else f"{folder} ({seen[folder]})"
    return names


def differing(rows: list[ReportRow]) -> list[str]:
    """The config fields whose values are not the same in every row (sorted)."""
    keys = sorted({k for row in rows for k in row.config})
    return [k for k in keys if len({json.dumps(row.config.get(k), sort_keys=True) for row in rows}) > 1]


def select(rows: list[ReportRow], filters: list[str]) -> list[ReportRow]:
    """Rows whose field KEY (config, else result; dotted) reads VALUE, for every "KEY=VALUE" in `filters`
    (compared as text: `loader=pool`, `num_workers=2`, `status=ok`).

    Raises:
        DlError: a filter without "=".
    """
    wanted = []
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise DlError(f"--filter {item!r}: write KEY=VALUE, e.g. loader=pool.")
        wanted.append((key, value))
    return [row for row in rows if all(_text(row.value(k)) == v for k, v in wanted)]


def _text(value) -> str:
    return json.dumps(value) if isinstance(value, list | dict) else str(value)


def order(rows: list[ReportRow], sort: str | None, reverse: bool = False) -> list[ReportRow]:
    """Grouped by scenario (in first-seen order), each group sorted by `sort` (a metric or config field;
    rows without it last), else in file order."""
    groups: dict[str, list[ReportRow]] = {}
    for row in rows:
        groups.setdefault(row.scenario, []).append(row)
    out = []
    for group in groups.values():
        if sort:
            present = [r for r in group if isinstance(r.value(sort), int | float | str)]
            missing = [r for r in group if r not in present]
            present.sort(key=lambda r: (isinstance(r.value(sort), str), r.value(sort)), reverse=reverse)
            group = present + missing
        out += group
    return out


def ratios(rows: list[ReportRow], baseline: str, keys=("samples_per_s", "peak_rss_gb")) -> dict[str, dict]:
    """`{label: {key: value / baseline's value}}` for each row that has both.

    Raises:
        DlError: no row is labelled (or named) `baseline`; the message lists the labels.
    """
    base = next((r for r in rows if baseline in (r.label, r.result.get("name"))), None)
    if base is None:
        raise DlError(f"--baseline {baseline!r} is none of the runs: {', '.join(r.label for r in rows)}.")
    out = {}
    for row in rows:
        out[row.label] = {k: round(row.result[k] / base.result[k], 3) for k in keys
                          if isinstance(row.result.get(k), int | float) and base.result.get(k)}
    return out


def distinct_episodes(result: dict) -> str | None:
    """`shuffle_randomness_frac` as `dl run` shows it, "13.4 of 16" (None without it or a batch size)."""
    frac, batch = result.get("shuffle_randomness_frac"), (result.get("config") or {}).get("batch_size")
    return f"{frac * batch:.1f} of {batch}" if isinstance(frac, int | float) and batch else None


def summary_rows(rows: list[ReportRow], columns: list[str], ratio: dict[str, dict] | None) -> list[dict]:
    """The rows of `summary.csv`: run, scenario, status, the differing config columns, the metrics, the
    ratios, and for multi-rank runs the per-rank disjointness."""
    out = []
    for row in rows:
        line = {"run": row.label, "scenario": row.scenario, "status": row.result.get("status")}
        line.update({c: _text(row.config.get(c)) if isinstance(row.config.get(c), list | dict) else row.config.get(c)
                     for c in columns})
        line.update({m: row.result.get(m) for m in METRICS})
        line["distinct_episodes_per_batch"] = distinct_episodes(row.result)
        for key, value in (ratio or {}).get(row.label, {}).items():
            line[f"{key}_ratio"] = value
        disjoint = row.result.get("rank_disjointness")
        if disjoint:
            line["episodes_per_rank"] = " ".join(f"{n:g}" for n in disjoint["episodes_per_rank"])
            line["shared_episodes"] = disjoint["shared_episodes"]
        out.append(line)
    return out


def mixture_rows(rows: list[ReportRow]) -> list[dict]:
    """Per member of every mixture run (`dl run --mix`): its weight, the samples drawn from it in the steady window
    and their share of the run's (next to the weight: the two agree within sampling noise), its quota of a mixture
    epoch, its passes per epoch (over 1: its own epoch restarts within each mixture epoch, oversampled; under 1: read
    in part) and the member epochs started by then."""
    out = []
    for row in rows:
        stats = row.result.get("loader_stats") or {}
        names = stats.get("members")
        if not isinstance(names, list):
            continue
        samples = [stats.get(f"member{m}_samples") or 0 for m in range(len(names))]
        for m, name in enumerate(names):
            out.append({"run": row.label, "member": name, "weight": (stats.get("weights") or [None] * len(names))[m],
                        "share": round(samples[m] / sum(samples), 4) if sum(samples) else None,
                        "samples": samples[m], "quota": stats.get(f"member{m}_quota"),
                        "passes_per_epoch": stats.get(f"member{m}_passes_per_epoch"),
                        "epochs_started": stats.get(f"member{m}_epochs_started")})
    return out


def rank_rows(rows: list[ReportRow]) -> list[dict]:
    """Per rank of every multi-rank run: node, samples/s, episodes admitted (pool), episodes seen per
    epoch, and the run's count of episodes seen by more than one rank in the same epoch."""
    out = []
    for row in rows:
        disjoint = row.result.get("rank_disjointness", {})
        for rank in row.result.get("ranks", []):
            seen = rank.get("episodes_by_epoch", {})
            out.append({"run": row.label, "rank": rank.get("rank"), "node": rank.get("environment", {}).get("node"),
                        "samples_per_s": rank.get("samples_per_s"),
                        "episodes_admitted": rank.get("loader_stats", {}).get("episodes_admitted"),
                        "episodes_per_epoch": round(sum(map(len, seen.values())) / len(seen), 1) if seen else None,
                        "shared_episodes": disjoint.get("shared_episodes")})
    return out
