"""A `dl run` never replaces another run's result unseen (`dl.bench.results.keep_earlier_results`): a result of the
same name from another dataset or with other settings is kept and the new run numbered; a rerun of the same run
replaces its result, and the terminal says which."""

import json

import pytest
from cli_helpers import FAST, dl_subprocess

from dl.bench.results import keep_earlier_results
from dl.bench.spec import RunSpec


def spec(root, out_dir, **over):
    return RunSpec(root=str(root), out_dir=str(out_dir), **over)


def write_result(out_dir, run: RunSpec, **config):
    (out_dir / f"{run.name}.json").write_text(json.dumps({"name": run.name, "status": "ok",
                                                          "config": {**run.public_dict(), **config}}))


def test_another_datasets_result_is_kept_and_a_rerun_replaces(tmp_path):
    first = spec("/data/a", tmp_path)
    write_result(tmp_path, first, metadata_snapshot="/elsewhere/specs/metadata.json")
    rerun, other, other_too = spec("/data/a", tmp_path), spec("/data/b", tmp_path), spec("/data/b", tmp_path,
                                                                                           batch_size=32)
    lines = keep_earlier_results([rerun], tmp_path)
    assert rerun.name == first.name == "map-cpu-single-w2"
    assert lines == [f"map-cpu-single-w2: replacing the earlier map-cpu-single-w2.json in {tmp_path} (the same run: "
                     "same dataset and settings)"]
    lines = keep_earlier_results([other, other_too], tmp_path)
    assert (other.name, other_too.name) == ("map-cpu-single-w2-2", "map-cpu-single-w2-3")  # one each, none replaced
    assert lines[0] == (f"map-cpu-single-w2-2: kept the earlier result(s) map-cpu-single-w2.json (another root) in "
                        f"{tmp_path}, this run writes map-cpu-single-w2-2.json")
    write_result(tmp_path, other)
    again = spec("/data/b", tmp_path)
    assert keep_earlier_results([again], tmp_path)[1].startswith("map-cpu-single-w2-2: replacing the earlier")
    assert again.name == "map-cpu-single-w2-2"  # the rerun of the second run finds its own result


def test_a_result_that_recorded_no_settings_is_replaced(tmp_path):
    (tmp_path / "map-cpu-single-w2.json").write_text(json.dumps({"name": "map-cpu-single-w2", "status": "failed",
                                                                 "error": "the run process ended"}))
    run = spec("/data/a", tmp_path)
    assert keep_earlier_results([run], tmp_path) == [
        f"map-cpu-single-w2: replacing the earlier map-cpu-single-w2.json in {tmp_path} (a run that recorded no "
        "settings)"]
    assert run.name == "map-cpu-single-w2"


@pytest.mark.slow
def test_dl_run_on_two_datasets_keeps_both_results(small_dataset, dataset_factory, tmp_path):
    other = dataset_factory(episodes=2, frames_per_episode=(20, 20), cameras=1)
    out = tmp_path / "out"
    args = ("--num-workers", "0", "--ceiling-s", "0", *FAST, "--out-dir", out)
    first = dl_subprocess("run", "--root", small_dataset, *args, cache_dir=tmp_path / "cache")
    second = dl_subprocess("run", "--root", other, *args, cache_dir=tmp_path / "cache")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "kept the earlier result(s) map-cpu-single-w0.json (another root" in second.stdout
    roots = {json.loads((out / f"{name}.json").read_text())["config"]["root"]
             for name in ("map-cpu-single-w0", "map-cpu-single-w0-2")}
    assert roots == {str(small_dataset), str(other)}
    assert len((out / "results.csv").read_text().splitlines()) == 3  # the header and both runs
