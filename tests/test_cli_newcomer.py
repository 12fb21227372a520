"""What a newcomer meets: output in a file or a pipe (not cut at 80 columns, no trailing spaces), `--json` for
scripts, `dl run --help`'s headings, `--repeats` (interleaved, medians and ranges), `dl cache`, and the messages that
name the fix (missing files, a missing info.json, the loopback servers' commands)."""

import json
from pathlib import Path

import pytest
from cli_helpers import FAST, dl_subprocess, invoke

from dl.bench.repeats import interleaved, overlapping, summarize
from dl.bench.spec import RunSpec
from dl.testing.serve import complete_episodes
from dl.testing.synthetic import camera_key


def test_output_to_a_file_is_neither_wrapped_nor_padded(tmp_path):
    proc = dl_subprocess("plugins", cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(len(line) > 80 for line in lines), "a table was cut at 80 columns"
    assert not [line for line in lines if line != line.rstrip()], "lines padded with trailing spaces"


def test_run_help_groups_its_options():
    text = invoke("run", "--help").output
    headings = ["What to load:", "How to load:", "What to measure:", "Where to run:"]
    at = [text.index(h) for h in headings]
    assert at == sorted(at)
    def option(name):  # where the option's own help line starts
        return text.index(f"\n  {name} ")

    assert option("--root") < at[1] < option("--num-workers") < at[2] < option("--repeats") < at[3]
    assert at[3] < option("--scheduler-option")


def test_repeats_interleave_and_name_each_run():
    a, b, c = (RunSpec(root="/x", num_workers=w) for w in (0, 1, 2))
    order = interleaved([a, b, c], 3)
    assert [s.name for s in order] == [
        "map-cpu-single-w0-rep1", "map-cpu-single-w1-rep1", "map-cpu-single-w2-rep1",
        "map-cpu-single-w1-rep2", "map-cpu-single-w2-rep2", "map-cpu-single-w0-rep2",
        "map-cpu-single-w2-rep3", "map-cpu-single-w0-rep3", "map-cpu-single-w1-rep3"]
    assert {s.repeat_of for s in order} == {a.name, b.name, c.name}
    assert interleaved([a, b], 1) == [a, b]


def _ok(name, of, sps):
    return {"name": name, "status": "ok", "samples_per_s": sps, "peak_rss_gb": 1.0, "config": {"repeat_of": of}}


def test_repeat_summary_gives_medians_ranges_and_overlaps():
    results = [_ok("a-rep1", "a", 100.0), _ok("b-rep1", "b", 300.0), _ok("a-rep2", "a", 120.0),
               _ok("b-rep2", "b", 110.0), _ok("a-rep3", "a", 90.0), _ok("b-rep3", "b", 320.0),
               {"name": "b-rep4", "status": "failed", "config": {"repeat_of": "b"}}]
    summary = summarize(results)
    assert [s["run"] for s in summary] == ["a", "b"] and [s["repeats"] for s in summary] == [3, 3]
    assert summary[0]["samples_per_s"] == {"median": 100.0, "min": 90.0, "max": 120.0}
    assert summary[1]["samples_per_s"] == {"median": 300.0, "min": 110.0, "max": 320.0}
    (line,) = overlapping(summary)
    assert line.startswith("a and b: samples_per_s ranges overlap (90-120 and 110-320)")
    apart = summarize([_ok("a1", "a", 100.0), _ok("a2", "a", 110.0), _ok("b1", "b", 200.0), _ok("b2", "b", 210.0)])
    assert overlapping(apart) == []


def test_report_json_and_repeat_ranges(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name, of, sps in (("a-rep1", "a", 100.0), ("a-rep2", "a", 120.0), ("b-rep1", "b", 115.0),
                          ("b-rep2", "b", 140.0)):
        result = {**_ok(name, of, sps), "config": {"name": name, "repeat_of": of, "loader": "map", "num_workers": 2,
                                                   "out_dir": "x"}}
        (folder / f"{name}.json").write_text(json.dumps(result))
    table = invoke("report", folder)
    assert "repeats: median (range)" in table.output and "a and b: samples_per_s ranges overlap" in table.output
    out = invoke("report", folder, "--json").stdout
    data = json.loads(out[out.index("{"):])
    assert len(data["runs"]) == 4 and [r["run"] for r in data["repeats"]] == ["a", "b"]


def test_info_json(small_dataset):
    result = invoke("info", small_dataset, "--json")
    data = json.loads(result.stdout[result.stdout.index("{\"root\""):])
    assert data["episodes"] == 6 and data["missing_files"] == {} and data["complete_episodes"] == list(range(6))
    assert [c["key"] for c in data["cameras"]] == [camera_key(0), camera_key(1)]


def test_run_json_is_the_results(small_dataset, tmp_path):
    proc = dl_subprocess("run", "--root", small_dataset, *FAST, "--num-workers", "0", "--ceiling-s", "0",
                         "--out-dir", tmp_path / "out", "--json", cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["results"]
    assert result["status"] == "ok" and result["name"] == "map-cpu-single-w0"
    assert "results.csv lists" in proc.stderr  # every other line went to stderr
    assert result["machine_load"]["cpu_count"] >= 1 and "steady window" in result["machine_load"]["phases"]


@pytest.mark.slow
def test_run_repeats_two_loaders_interleaved_with_medians(small_dataset, tmp_path):
    out = tmp_path / "out"
    proc = dl_subprocess("run", "--root", small_dataset, "--scenario", "mmap_local,stream_local", *FAST,
                         "--ceiling-s", "0", "--repeats", "3", "--out-dir", out, cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    submitted = json.loads((out / "specs" / "submission.json").read_text())
    names = [run["spec"]["name"] if "spec" in run else run["name"] for run in submitted["runs"]]
    map_, pool = "mmap_local-cpu-single-w2", "stream_local-cpu-single-w2"
    assert names == [f"{map_}-rep1", f"{pool}-rep1", f"{pool}-rep2", f"{map_}-rep2", f"{map_}-rep3", f"{pool}-rep3"]
    table = proc.stdout[proc.stdout.index("repeats: median (range) per configuration"):]
    for config in (map_, pool):
        (row,) = [line for line in table.splitlines() if f" {config} " in line]
        assert row.split("│")[2].strip() == "3" and "-" in row.split("│")[3], row  # 3 runs, a median (range)


def test_cache_lists_sizes_and_limits_and_clears(tmp_path, monkeypatch):
    cache = tmp_path / "dl-cache"
    monkeypatch.setenv("DL_CACHE_DIR", str(cache))
    (cache / "tabular").mkdir(parents=True)
    (cache / "tabular" / "a.arrow").write_bytes(b"x" * 3000)
    (cache / "bench" / "runs").mkdir(parents=True)
    (cache / "bench" / "runs" / "r.json").write_bytes(b"y" * 500)
    listed = json.loads(invoke("cache", "--json").output)
    by = {f["name"]: f for f in listed["folders"]}
    assert by["tabular"]["bytes"] == 3000 and by["tabular"]["files"] == 1 and "16 GB" in by["tabular"]["limit"]
    assert by["bench"]["bytes"] == 500
    table = invoke("cache").output
    assert "memory-mapped Arrow rows" in table and "kept under" in table
    cleared = invoke("cache", "--clear", "bench")
    assert "cleared bench" in cleared.output and not (cache / "bench").exists() and (cache / "tabular").exists()
    unknown = invoke("cache", "--clear", "nope")
    assert unknown.exit_code == 2 and "no subfolder nope" in unknown.output


def test_no_selected_episode_complete_names_the_complete_ones(small_dataset, writable_copy, tmp_path):
    root = writable_copy(small_dataset)
    missing = f"videos/{camera_key(1)}/chunk-000/file-001.mp4"
    (root / missing).unlink()
    result = invoke("run", "--root", root, *FAST, "--episodes", "3-4", "--out-dir", tmp_path / "out")
    assert result.exit_code != 0 and missing in result.output
    assert "none of the selected is complete; the complete episodes are --episodes 0-2)" in result.output


def test_a_dataset_folder_without_info_json_names_the_file(small_dataset, writable_copy):
    root = writable_copy(small_dataset)
    (root / "meta" / "info.json").unlink()
    result = invoke("info", root)
    assert result.exit_code == 2 and "has no meta/info.json, though its meta/ holds other files" in result.output
    assert "restore meta/info.json" in result.output and "run the same dl transcode again" in result.output


def test_serve_selects_the_complete_episodes(small_dataset, writable_copy):
    assert complete_episodes(Path(small_dataset)) is None
    root = writable_copy(small_dataset)
    (root / f"videos/{camera_key(0)}/chunk-000/file-000.mp4").unlink()
    assert complete_episodes(Path(root)) == "3-5"
