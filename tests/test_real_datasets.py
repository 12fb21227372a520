"""Datasets written the way LeRobot's own tools write real ones (dl.testing.real_cases): what the library, `dl run`,
`dl info` and `dl validate` say and serve. The frame-by-frame values through every loader, 0 and 2 workers, with and
without windows, are the loader conformance suite's (tests/test_conformance_loaders.py)."""

import json
import warnings

import pytest
import torch
from cli_helpers import dl_subprocess, invoke

import dl
from dl.contracts.errors import DatasetFormatError, TimestampToleranceError
from dl.testing.real_cases import REAL_CASES, check_batch
from dl.testing.synthetic import read_frame_code, write_synthetic_dataset

FAST = ["--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4",
        "--ceiling-s", "0.2"]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """`real(case)` -> the root of a `REAL_CASES` dataset (generated once per module)."""
    made = {}

    def root(case):
        if case not in made:
            made[case] = write_synthetic_dataset(tmp_path_factory.mktemp(case) / "ds", REAL_CASES[case].config)
        return made[case]

    return root


def notices(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, dl.DlWarning)]


def make(root, **config):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = dl.make_dataset(str(root), image_dtype="uint8", **config)
    return dataset, notices(caught)


# ------------------------------------------------------------------------ the converter's mislabelled data files


def test_converter_boundaries_are_read_from_the_next_file_with_one_warning(real):
    dataset, said = make(real("converter"))
    moved = [m for m in said if "rows are in" in m]
    assert len(moved) == 1, said  # one warning for the whole selection, naming every moved episode
    assert "episode 2's rows are in data/chunk-000/file-001.parquet, not data/chunk-000/file-000.parquet (and 1 " \
           "more such episode(s): 4)" in moved[0]
    assert "LeRobot's v2.1 -> v3.0 converter (LeRobot <= 0.4.x)" in moved[0]
    for i in (0, len(dataset) - 1, int(dataset.starts[2]), int(dataset.starts[4])):
        sample = dataset[i]
        assert read_frame_code(sample["observation.images.cam0"]) == (int(sample["index"]), 0)


def test_converter_boundaries_through_a_remote_source_list_nothing_more(real, tmp_path):
    from dl.testing.hub_server import HubServer

    plain = write_synthetic_dataset(tmp_path / "plain", REAL_CASES["converter"].config.__class__(
        **{**REAL_CASES["converter"].config.__dict__, "converter_boundaries": False}))
    with HubServer() as hub:
        listed = {}
        for name, folder in (("plain", plain), ("converter", real("converter"))):
            hub.add_revision(f"tests/{name}", folder)
            before = len(hub.requests)
            for loader in ("map", "pool"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    dataset = dl.make_dataset(f"tests/{name}", source="hub", loader=loader, image_dtype="uint8",
                                              source_options={"storage_options": {"endpoint": hub.endpoint}})
                    batches = dl.make_dataloader(dataset, batch_size=4, num_workers=0)
                    seen = [i for b in batches for i in check_batch(REAL_CASES["converter"].config, b, None)]
                assert sorted(seen) == list(range(len(seen)))
            listed[name] = [p for _, p in hub.requests[before:] if "/tree/" in p]
    assert len(listed["converter"]) == len(listed["plain"]), listed  # no listing per moved episode


# ------------------------------------------------------------------------ recorded timestamps


def test_recorded_timestamps_are_refused_up_front_naming_the_tolerance_that_serves_them(real):
    root = real("recorded")
    with pytest.raises(TimestampToleranceError) as err:
        make(root)
    message = str(err.value)
    assert "more than tolerance_s=0.0001" in message and "The same holds for 4 more episode(s)" in message
    # the rows are a frame off their own: only a tolerance over half a frame would serve them, which dl never
    # suggests; it names the row pairing
    assert "holds one frame per row" in message and "shifted by +0.03" in message
    assert "--frame-pairing row" in message and "--tolerance-s" not in message
    dataset, _ = make(root, tolerance_s=0.06)  # chosen anyway: each row gets its nearest frame, as in LeRobot
    sample = dataset[len(dataset) // 2]
    assert read_frame_code(sample["observation.images.cam0"])[0] != int(sample["index"])  # here a later one
    dataset, _ = make(root, frame_pairing="row")
    sample = dataset[len(dataset) // 2]
    assert read_frame_code(sample["observation.images.cam0"])[0] == int(sample["index"])


def test_recorded_timestamps_in_the_pool_are_refused_when_the_episode_is_read(real):
    dataset, _ = make(real("recorded"), loader="pool")  # the pool reads rows as episodes enter it
    with pytest.raises(TimestampToleranceError, match="--frame-pairing row"):
        next(iter(dataset))


def test_dl_info_and_validate_say_which_tolerance_serves_recorded_timestamps(real):
    root = real("recorded")
    result = invoke("info", root)
    assert result.exit_code == 0
    line = next(x for x in result.output.splitlines() if x.startswith("timestamps"))
    assert "recorded: start 0.0" in line and "--frame-pairing row" in line and "--tolerance-s 0" not in line
    assert "served with --tolerance-s 0.06" in invoke("info", root, "--tolerance-s", "0.06").output
    proc = invoke("validate", root)
    assert proc.exit_code == 1
    assert "--frame-pairing row" in proc.stdout and "no tolerance_s under half a frame period" in proc.stdout
    assert invoke("validate", root, "--tolerance-s", "0.06").exit_code == 0
    assert invoke("validate", root, "--frame-pairing", "row").exit_code == 0


@pytest.mark.slow
def test_dl_run_serves_recorded_timestamps_with_tolerance_s(real, tmp_path):
    """The pool (its workers read the rows): the map loader's refusal and tolerance are the library's tests."""
    loader = "pool"
    root = real("recorded")
    refused = dl_subprocess("run", "--root", root, "--loader", loader, *FAST, "--out-dir", tmp_path / "a",
                            cache_dir=tmp_path)
    assert refused.returncode == 1 and "--frame-pairing row" in refused.stdout.replace("\n", "")
    proc = dl_subprocess("run", "--root", root, "--loader", loader, "--tolerance-s", "0.06", "--mode", "sarm",
                         *FAST, "--out-dir", tmp_path / "b", cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(next((tmp_path / "b").glob("*.json")).read_text())
    assert result["status"] == "ok" and result["config"]["tolerance_s"] == 0.06


# ------------------------------------------------------------------------ stale totals (a partial upload)


def test_stale_totals_refuse_all_but_serve_the_episodes_present_with_a_warning(real):
    root = real("stale_totals")
    with pytest.raises(DatasetFormatError, match=r"total_episodes=12 but meta/episodes has no row for episode\(s\) "
                                                 r"5-11 .*--episodes 0-4"):
        make(root)
    dataset, said = make(root, episodes=[0, 1, 2, 3, 4])
    assert len(dataset) == sum(ep.length for ep in dataset.episodes)
    assert any("counts total_episodes=12" in m and "--episodes 0-4" in m for m in said)


def test_stale_totals_dl_info_and_validate_still_summarize(real):
    root = real("stale_totals")
    result = invoke("info", root)
    assert result.exit_code == 0 and "5 episodes (meta/info.json says 12)" in result.output
    assert "all data and video files present" in result.output
    proc = invoke("validate", root)
    assert proc.exit_code == 1
    lines = proc.stdout.splitlines()
    assert any(x.startswith("error: ") and "dl run` without --episodes refuses" in x for x in lines)
    assert "decoded " in proc.stdout and lines[-1].endswith("episodes without errors: --episodes 0-4")
    ok = invoke("validate", root, "--episodes", "0-4")
    assert ok.exit_code == 0 and "ok: 5 episode(s)" in ok.stdout and "1 warning(s)" in ok.stdout


# ------------------------------------------------------------------------ images stored in the data parquet


@pytest.mark.parametrize("case", ["png_images", "jpeg_images", "mixed"])
def test_image_features_float32_is_uint8_over_255(real, case):
    root = real(case)
    as_uint8, said = make(root)
    as_float = dl.make_dataset(str(root))
    assert not said
    for i in (0, 7, len(as_uint8) - 1):
        a, b = as_uint8[i], as_float[i]
        for key in as_uint8.meta.camera_keys:
            assert a[key].dtype == torch.uint8 and b[key].dtype == torch.float32 and a[key].shape == (3, 64, 64)
            assert torch.equal(b[key], a[key].float() / 255.0)
    assert as_uint8.meta.image_keys == REAL_CASES[case].config.image_keys


@pytest.mark.slow
def test_dl_run_counts_image_decode_in_decode_time_and_ceiling(real, tmp_path):
    proc = dl_subprocess("run", "--root", real("png_images"), "--num-workers", "0", *FAST, "--out-dir", tmp_path / "o",
                         cache_dir=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(next((tmp_path / "o").glob("*.json")).read_text())
    assert result["decode_pct"] > 0 and result["decoded_frames_per_s"] > 0
    assert result["decode_ceiling"]["random_frames_per_s"] > 0
    assert result["dataset"]["cameras"] == REAL_CASES["png_images"].config.image_keys


# ------------------------------------------------------------------------ what LeRobot 0.6 writes


@pytest.mark.parametrize("case, served", [("depth", ["observation.images.depth"]),
                                          ("annotations", ["language_persistent", "language_events"])])
def test_depth_and_language_are_served_without_a_notice(real, case, served):
    dataset, said = make(real(case))
    assert not [m for m in said if "leaves it out" in m] and dataset.meta.left_out == {}
    assert all(key in dataset[0] for key in served)
    batch = next(iter(dl.make_dataloader(dataset, batch_size=4)))
    assert len(check_batch(REAL_CASES[case].config, batch, None)) == 4  # raises naming a wrong value


def test_the_tools_list_of_info_json_reaches_the_metadata(real):
    dataset, _ = make(real("annotations"))
    assert [t["function"]["name"] for t in dataset.meta.tools] == ["say"]


def test_subtasks_are_served_as_lerobot_does(real):
    dataset, _ = make(real("annotations"))
    sample = dataset[12]
    assert sample["subtask"] == f"step {(int(sample['frame_index']) // 10) % 3}"


def test_dl_validate_and_info_on_a_depth_camera(real):
    proc = invoke("validate", real("depth"))
    assert proc.exit_code == 0 and "warning: " not in proc.stdout and "0 warning(s)" in proc.stdout, proc.stdout
    shown = invoke("info", real("depth")).output.replace("\n", " ").replace("│", "")
    assert "yes: depth in mm, 10-10000 mm, log codes" in " ".join(shown.split())
    assert "video (depth, 12-bit codes)" in " ".join(shown.split())


# ------------------------------------------------------------------------ warnings read like errors


@pytest.mark.slow  # starts `dl` processes
def test_warnings_print_as_one_line_without_python_source_prefixes(real, tmp_path):
    proc = dl_subprocess("validate", real("converter"), cache_dir=tmp_path)
    assert proc.returncode == 0
    out = proc.stdout + proc.stderr
    assert "UserWarning" not in out and ".py:" not in out and "warnings.warn" not in out
    warned = [line for line in proc.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 1 and "rows are in data/chunk-000/file-001.parquet" in warned[0]
    assert proc.stdout.splitlines()[-1].endswith("1 warning(s)")
    library = dl_subprocess("info", real("stale_totals"), cache_dir=tmp_path)  # a warning printed by Python's machinery
    lines = [x for x in library.stderr.splitlines() if x.strip()]
    assert lines and all(x.startswith("warning: ") for x in lines), library.stderr
