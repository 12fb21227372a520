"""`dl report`: result files of several folders collapsed into one comparison (grouping, differing config
columns, filters, sort, ratios, ranks merged when only rank files exist), summary.csv and the plots; the
throughput timeline the benchmark records."""

import csv
import json

import pytest
from cli_helpers import invoke

from dl.bench.report import differing, load_rows, order, ratios, select
from dl.bench.timeline import EpisodesSeen, Timeline, rank_overlap, rates, sum_timelines
from dl.contracts.errors import DlError


def result(name, sps, rss, scenario=None, status="ok", **config):
    return {"name": name, "status": status, "samples_per_s": sps, "peak_rss_gb": rss,
            "throughput_timeline": {"bin_s": 1.0, "samples_per_bin": [10, int(sps), int(sps)], "last_bin_s": 1.0,
                                    "window_start_s": 1.0},
            "config": {"name": name, "scenario": scenario, "loader": "map", "num_workers": 2, "world_size": 1,
                       "out_dir": "x", **config}}


def rank(name, r, sps, episodes):
    res = result(f"{name}-rank{r}", sps, 1.0, "two", loader="pool", world_size=2)
    res.update(rank=r, episodes_by_epoch={"0": episodes}, loader_stats={"episodes_admitted": len(episodes)},
               loader_stats_merge={"episodes_admitted": "sum"},
               video_decoder_cache={"hits": 0, "misses": 0, "evictions": 0, "open": 0},
               environment={"node": f"node{r + 1}"})
    return res


@pytest.fixture
def folders(tmp_path):
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for folder in (local, cluster, local / "specs"):
        folder.mkdir(parents=True)
    (local / "specs" / "a.json").write_text(json.dumps({"name": "a", "root": "/x"}))  # a spec: not a result
    (local / "a.json").write_text(json.dumps(result("a", 100.0, 1.0, "one", num_workers=0)))
    (local / "b.json").write_text(json.dumps(result("b", 300.0, 2.0, "one")))
    (local / "broken.json").write_text(json.dumps({"name": "broken", "status": "failed", "error": "boom",
                                                   "config": {"scenario": "one", "loader": "map"}}))
    for r, episodes in ((0, [1, 3]), (1, [0, 2])):  # only rank files: merged by the report
        (cluster / f"two-rank{r}.json").write_text(json.dumps(rank("two", r, 50.0 * (r + 1), episodes)))
    return local, cluster


def test_rows_merge_ranks_and_label_by_folder(folders):
    rows = load_rows(list(folders))
    assert [r.label for r in rows] == ["local/a", "local/b", "local/broken", "cluster/two"]  # folders as given
    merged = rows[3].result
    assert merged["samples_per_s"] == 150.0
    assert merged["rank_disjointness"] == {"episodes_per_rank": [2.0, 2.0], "shared_episodes": 0}
    assert differing(rows) == ["loader", "num_workers", "world_size"]


def test_filter_sort_and_ratios(folders):
    rows = load_rows(list(folders))
    pool = select(rows, ["loader=pool"])
    assert [r.label for r in pool] == ["cluster/two"]
    assert [r.label for r in select(rows, ["status=ok", "num_workers=2"])] == ["local/b", "cluster/two"]
    ordered = order(rows, "samples_per_s", reverse=True)
    assert [r.label for r in ordered] == ["local/b", "local/a", "local/broken", "cluster/two"]  # grouped by scenario
    assert ratios(rows, "local/a")["local/b"] == {"samples_per_s": 3.0, "peak_rss_gb": 2.0}
    with pytest.raises(DlError, match="--baseline 'nope' is none of the runs"):
        ratios(rows, "nope")
    with pytest.raises(DlError, match="write KEY=VALUE"):
        select(rows, ["loader"])


def test_cli_writes_summary_and_plots(folders, tmp_path):
    local, cluster = folders
    done = invoke("report", local, cluster, "--baseline", "local/a", "--plot", "--out", tmp_path / "report")
    assert done.exit_code == 0, done.output
    assert "cluster/two" in done.output and "node2" in done.output and "local/broken" in done.output
    rows = list(csv.DictReader(open(tmp_path / "report" / "summary.csv")))
    assert [r["run"] for r in rows] == ["local/a", "local/b", "local/broken", "cluster/two"]
    assert rows[1]["samples_per_s_ratio"] == "3.0" and rows[3]["shared_episodes"] == "0"
    for picture in ("comparison.png", "throughput.png"):
        assert (tmp_path / "report" / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_refuses_a_folder_without_results(tmp_path):
    done = invoke("report", tmp_path)
    assert done.exit_code == 2 and "no dl result files" in done.output


def test_timeline_bins_samples_per_second_from_the_first_iter():
    timeline = Timeline(start=100.0)
    for now, n in ((100.2, 4), (100.9, 4), (101.1, 4), (103.5, 4)):
        timeline.add(now, n)
    timeline.mark_window(100.9)
    recorded = timeline.to_dict()
    assert recorded == {"bin_s": 1.0, "samples_per_bin": [8, 4, 0, 4], "last_bin_s": 0.5, "window_start_s": 0.9}
    assert rates(recorded) == [8.0, 4.0, 0.0, 8.0]  # the last bin over the half second it covers
    summed = sum_timelines([recorded, {**recorded, "samples_per_bin": [1, 1], "window_start_s": 1.2}])
    assert summed["samples_per_bin"] == [9, 5, 0, 4] and summed["window_start_s"] == 1.2


def test_episodes_seen_and_rank_overlap():
    import torch

    seen = EpisodesSeen()
    seen.add(0, torch.tensor([3, 3, 1]))
    seen.add(1, torch.tensor([2]))
    assert seen.to_dict() == {"0": [1, 3], "1": [2]}
    ranks = [{"episodes_by_epoch": {"0": [1, 3], "1": [2]}}, {"episodes_by_epoch": {"0": [2], "1": [1, 3]}}]
    assert rank_overlap(ranks) == {"episodes_per_rank": [1.5, 1.5], "shared_episodes": 0}  # per epoch
    ranks[1]["episodes_by_epoch"]["0"].append(3)
    assert rank_overlap(ranks)["shared_episodes"] == 1


def test_the_table_fits_80_columns_with_episodes_as_ranges(tmp_path):
    """Runs on two datasets, one of them on a selection: the selection prints as ranges, the dataset by its
    folder's name (the roots above the table), and at 80 columns the configuration and the figures go into two
    tables rather than folding every cell."""
    from click.testing import CliRunner

    from dl.cli.main import cli

    folder = tmp_path / "runs"
    folder.mkdir()
    episodes = [0, 3, 4, 5, 6, 8, *range(10, 25), *range(26, 33), *range(35, 50)]
    for name, root, selection in (("map-cpu-single-w2", "/data/default", None),
                                  ("map-cpu-single-w2-2", "/data/open50", episodes),
                                  ("pool-cpu-single-w2-2", "/data/open50", episodes)):
        (folder / f"{name}.json").write_text(json.dumps(result(name, 674.4, 1.152, root=root, episodes=selection)))
    done = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["report", str(folder)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert max(map(len, lines)) <= 80 and len(lines) < 40
    assert "dataset open50: /data/open50" in lines and "dataset default: /data/default" in lines
    words = " ".join(done.output.replace("│", " ").split())
    assert "0, 3-6, 8, 10-24, 26-32, 35-49" in words and "[0," not in words
    for name in ("map-cpu-single-w2", "map-cpu-single-w2-2", "pool-cpu-single-w2-2"):
        assert name in words  # never folded
    rows = list(csv.DictReader(open(folder / "summary.csv")))
    assert json.loads(rows[1]["episodes"]) == episodes  # the CSV keeps the selection as recorded


def test_plots_name_each_run_by_dataset_and_give_far_apart_rates_a_panel_each(tmp_path):
    from dl.bench.plot import run_labels, throughput_panels

    folder = tmp_path / "runs"
    folder.mkdir()
    for name, sps, root, episodes in (("map-cpu-single-w2", 600.0, "/data/default", None),
                                      ("map-cpu-single-w2-2", 14.0, "/data/open50", [0, 3, 4, 5, 6, 8]),
                                      ("pool-cpu-single-w2", 700.0, "/data/default", None)):
        (folder / f"{name}.json").write_text(json.dumps(result(name, sps, 1.0, root=root, episodes=episodes)))
    rows = load_rows([folder])
    assert run_labels(rows) == ["default: map-cpu-single-w2\nepisodes all", "open50: map-cpu-single-w2-2\nepisodes "
                                "0,3-6,8", "default: pool-cpu-single-w2\nepisodes all"]
    assert throughput_panels(rows) == 3  # 14 samples/s beside 600: a panel each
    assert throughput_panels([rows[0], rows[2]]) == 1  # within 10x: one axis


def test_the_plot_hint_fits_how_dl_is_installed(monkeypatch):
    import sys
    from pathlib import Path

    from dl.bench import plot
    from dl.contracts import extras

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed
    with pytest.raises(DlError, match="dl report --plot needs matplotlib, which is not installed") as raised:
        plot.plot_comparison([], Path("unused.png"))
    checkout = Path(__file__).resolve().parents[1]  # the tests run from an editable install of this checkout
    assert str(raised.value).endswith(f"{sys.executable} -m pip install 'matplotlib>=3.7' (or from the checkout: "
                                      f"pip install -e '{checkout}[plot]')")
    monkeypatch.setattr(extras, "editable_checkout", lambda: None)  # an installed wheel: no checkout to name
    assert extras.install_hint("plot") == f"{sys.executable} -m pip install 'matplotlib>=3.7'"
    assert "dl[" not in extras.install_hint("testing") and "moto[server]>=5" in extras.install_hint("testing")


def test_datasets_are_named_by_folder_and_numbered_where_folders_share_a_name(tmp_path):
    from dl.bench.report import ReportRow, dataset_names

    rows = [ReportRow(f"r{i}", {}, {"root": root}) for i, root in
            enumerate(("/tmp/cache/default", "/data/open50", "/root/.cache/dl/default/", "/data/open50"))]
    assert dataset_names(rows) == {"/tmp/cache/default": "default (1)", "/data/open50": "open50",
                                   "/root/.cache/dl/default/": "default (2)"}


def test_every_run_of_the_throughput_plot_lies_inside_its_axis(tmp_path):
    """A slower first run, then one at up to 4x its rate on the same axis: the y axis spans both."""
    from dl.bench.plot import throughput_figure

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "map.json").write_text(json.dumps(result("map", 250.0, 1.0)))
    faster = result("pool", 600.0, 1.0)
    faster["throughput_timeline"]["samples_per_bin"] = [10, 600, 944, 700]
    (folder / "pool.json").write_text(json.dumps(faster))
    figure = throughput_figure(load_rows([folder]))
    (ax,) = figure.axes
    low, high = ax.get_ylim()
    assert low == 0
    for line in ax.get_lines():
        assert max(line.get_ydata()) <= high
    assert high >= 944
