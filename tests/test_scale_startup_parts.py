"""Where start-up goes (issue 68): opening a dataset times its parts (`dl.format.load_times`: listing, metadata
read, checks, index reads), the snapshot carries the parts read once, the results table names them in "dataset
built in", and `dl info` on a large dataset shows its progress."""

import io

from cli_helpers import invoke
from rich.console import Console

import dl
from dl.cli import info as info_command
from dl.cli.render import render_results
from dl.format.load_times import PARTS, READ_ONCE
from dl.format.metadata import DatasetMeta
from dl.plugins.local_source import local_source

FIELDS = [f"{part}_s" for part in PARTS]


def test_opening_times_each_part_and_the_snapshot_carries_the_reads(small_dataset, tmp_path):
    meta = DatasetMeta.load(local_source(str(small_dataset)))
    assert list(meta.load_times.fields()) == FIELDS == ["listing_s", "metadata_read_s", "checks_s", "index_reads_s"]
    assert meta.load_times.seconds["listing"] > 0 and meta.load_times.seconds["metadata_read"] > 0
    assert meta.load_times.seconds["index_reads"] == 0  # no video index read yet
    restored = DatasetMeta.from_snapshot(local_source(str(small_dataset)), meta.write_snapshot(tmp_path / "snap"))
    assert {k: restored.load_times.seconds[k] for k in READ_ONCE} == meta.load_times.read_once()
    assert restored.load_times.seconds["checks"] == restored.load_times.seconds["index_reads"] == 0
    loader = dl.make_dataset(str(small_dataset), loader="map")  # builds: selection checks, row screen, frame times
    times = loader.meta.load_times.seconds
    assert all(times[part] > 0 for part in PARTS), times


def test_features_selection_keeps_the_openings_times(small_dataset):
    loader = dl.make_dataset(str(small_dataset), loader="map", features=["observation.state"])
    assert loader.meta.load_times.seconds["listing"] > 0 and loader.meta.load_times.seconds["checks"] > 0


def test_the_table_splits_dataset_built_in():
    result = {"name": "map-cpu-single-w2", "status": "ok", "init_s": 3.329, "listing_s": 0.104,
              "metadata_read_s": 1.2, "checks_s": 0.5, "index_reads_s": 0.31,
              "config": {"loader": "map", "decoder": "cpu", "mode": "single", "num_workers": 2, "batch_size": 16}}
    out = io.StringIO()
    render_results([result], Console(file=out, width=250, color_system=None))
    assert "3.329 (listing 0.104, metadata 1.2, checks 0.5, index reads 0.31)" in out.getvalue()
    out = io.StringIO()
    render_results([{k: v for k, v in result.items() if k not in FIELDS}], Console(file=out, width=250,
                                                                                  color_system=None))
    assert "3.329" in out.getvalue() and "listing" not in out.getvalue()  # a result without parts: the value


def test_info_on_a_large_dataset_shows_progress(small_dataset, monkeypatch):
    result = invoke("info", small_dataset)
    assert result.exit_code == 0 and "dl info:" not in result.output  # small: no progress lines
    monkeypatch.setattr(info_command, "LARGE_EPISODES", 6)
    result = invoke("info", small_dataset)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "6 episodes opened in" in text and "listing" in text and "metadata read" in text
    for phase in ("checking files 1/1", "probing cameras 2/2", "checking episodes 1/1"):
        assert f"dl info: {phase}" in text
    assert "all data and video files present" in text
