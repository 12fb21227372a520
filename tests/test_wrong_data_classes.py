"""The classes of broken datasets where LeRobot would serve wrong data or crash (issue 17): each is refused with
one clear line naming the file and the episode (or, where LeRobot serves the stored values, warned about in one
line), and `dl validate` finds exactly what makes the loaders fail on the same episodes."""

import warnings

import numpy as np
import pytest
import torch
from cli_helpers import dl_subprocess, invoke

import dl
from dl.contracts.errors import DatasetFormatError, DlError, VideoDecodeError
from dl.testing.broken_cases import BROKEN, CAM0, WARNED, edit_info
from dl.testing.synthetic import read_frame_code


@pytest.fixture
def broken(small_dataset, writable_copy):
    def make(edit):
        root = writable_copy(small_dataset)
        edit(root)
        return root

    return make


def every_sample(root, loader, **config):
    dataset = dl.make_dataset(str(root), loader=loader, image_dtype="uint8", **config)
    return [dataset[i] for i in range(len(dataset))] if loader == "map" else list(dataset)


@pytest.mark.parametrize("loader", ["map", "pool"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_loaders_refuse_and_validate_finds_it(broken, case, loader):
    edit, says = BROKEN[case]
    root = broken(edit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DlError) as err:
            every_sample(root, loader)
    assert says in str(err.value), str(err.value)
    assert "\n" not in str(err.value).strip()
    result = invoke("validate", root)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert any(says in line for line in errors), result.stdout
    assert "Traceback" not in result.output


@pytest.mark.parametrize("case", sorted(WARNED))
def test_served_as_stored_with_one_warning_and_validate_counts_it(broken, case):
    edit, says = WARNED[case]
    root = broken(edit)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples = every_sample(root, "map")
    said = [str(w.message) for w in caught if issubclass(w.category, dl.DlWarning) and says in str(w.message)]
    assert len(said) == 1, [str(w.message) for w in caught]
    for sample in samples[::9]:
        assert read_frame_code(sample[CAM0]) == (int(sample["index"]), 0)
    result = invoke("validate", root)
    assert result.exit_code == 0, result.stdout
    assert any(line.startswith("warning: ") and says in line for line in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1].startswith("ok: 6 episode(s)")


def test_nan_and_inf_are_counted_and_refused_with_strict(broken):
    root = broken(WARNED["nan_and_inf"][0])
    for loader in ("map", "pool"):
        with pytest.raises(DatasetFormatError, match=r"NaN or inf values in episode\(s\) 1 \(observation.state: "
                                                     r"3\); refused \(strict\)"):
            every_sample(root, loader, strict=True)
    result = invoke("validate", root, "--strict")
    assert result.exit_code == 1 and "refused with --strict" in result.stdout
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        every_sample(root, "pool")
    assert sum("NaN or inf" in str(w.message) for w in caught) == 1


def test_a_decoder_that_failed_is_not_used_again(broken):
    """FFmpeg's state after an error on a corrupt payload is not safe to reuse (it crashed the process in 2 of 2
    runs of benchmarks/lerobot_parity.py): the file is opened afresh for the next sample."""
    root = broken(BROKEN["corrupt_mp4_payload"][0])
    ds = dl.make_dataset(str(root), image_dtype="uint8")
    key = (ds.meta.source.url, f"videos/{CAM0}/chunk-000/file-001.mp4")
    failed = 0
    for i in range(int(ds.starts[3]), len(ds)):
        try:
            ds[i]
        except VideoDecodeError:
            failed += 1
            assert key not in ds.decoder.cache.open_decoders()
    assert failed


def test_validate_finds_a_corrupt_payload_and_says_what_it_decoded(broken):
    root = broken(BROKEN["corrupt_mp4_payload"][0])
    result = invoke("validate", root)
    lines = result.stdout.splitlines()
    assert lines[0].startswith("checking 6 episode(s)") and "decoding every video frame and image" in lines[0]
    decoded = next(line for line in lines if line.startswith("decoded "))
    assert " video frame(s) and 0 image(s) in " in decoded and "per second" in decoded
    assert any(line.startswith("error: frames from 0.000 s on do not decode") and "[episodes 3-5]" in line and
               f"videos/{CAM0}/chunk-000/file-001.mp4 at 0.000-2.100 s (64 frames) failed" in line
               for line in lines), result.stdout
    quick = invoke("validate", root, "--quick")
    assert "decoding each episode's first and last video frame and image" in quick.stdout


@pytest.mark.parametrize("edit, says", [
    (lambda i: i.update(fps=0), "fps is 0; it must be a positive number"),
    (lambda i: i.update(fps="30"), "fps is '30'; it must be a positive number"),
    (lambda i: i.update(fps=None), "fps is None"),
    (lambda i: i.update(features=[]), "'features' must map each feature key"),
    (lambda i: i["features"]["action"].update(dtype="float128"), "feature 'action' has dtype 'float128'"),
    (lambda i: i["features"]["action"].update(shape="6"), "feature 'action' has shape '6'"),
], ids=["fps_zero", "fps_text", "fps_null", "features_a_list", "unknown_dtype", "shape_not_a_list"])
def test_info_json_that_cannot_be_read_is_one_error_line(broken, edit, says, tmp_path):
    root = broken(lambda r: edit_info(r, edit))
    with pytest.raises(DatasetFormatError, match=says.replace("(", r"\(").replace("[", r"\[")):
        dl.make_dataset(str(root))
    for command in ("info", "validate"):
        result = invoke(command, root)
        assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_root_that_is_a_file(small_dataset, tmp_path):
    for command in (["info"], ["validate"]):
        result = invoke(*command, small_dataset / "meta" / "info.json")
        assert result.exit_code == 2 and "is a file, not a dataset folder" in result.output
    proc = dl_subprocess("run", "--root", small_dataset / "meta" / "info.json", cache_dir=tmp_path)
    assert proc.returncode == 2 and "is a file, not a dataset folder" in proc.stderr


@pytest.mark.slow  # starts `dl` processes
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_or_inf_delta_timestamps_are_refused(small_dataset, tmp_path, value):
    with pytest.raises(DlError, match="offsets are finite numbers of seconds"):
        dl.make_dataset(str(small_dataset), delta_timestamps={"action": [0.0, float(value)]})
    proc = dl_subprocess("run", "--root", small_dataset, "--delta-timestamps", f"action=0,{value}",
                         cache_dir=tmp_path)
    assert proc.returncode == 2 and "finite numbers of seconds" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_an_empty_episodes_option_is_refused(small_dataset, tmp_path):
    for args in (["run", "--root", small_dataset, "--episodes", ""], ["validate", small_dataset, "--episodes", ""]):
        proc = dl_subprocess(*args, cache_dir=tmp_path)
        assert proc.returncode == 2 and "--episodes '' is empty" in proc.stderr, proc.stderr
    with pytest.raises(DlError, match="the selection is empty"):
        dl.make_dataset(str(small_dataset), episodes=[])


def test_a_cast_that_keeps_every_value_serves_in_the_info_json_dtype(broken):
    root = broken(lambda r: edit_info(r, lambda i: i["features"]["index"].update(dtype="int32")))
    samples = every_sample(root, "map")
    assert samples[5]["index"].dtype == torch.int32 and int(samples[5]["index"]) == 5


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_the_other_episodes_of_a_broken_dataset_stay_usable(broken, loader):
    root = broken(BROKEN["unknown_task_index"][0])  # episodes 3-5 (file-001)
    samples = every_sample(root, loader, episodes=[0, 1, 2])
    meta = dl.make_dataset(str(root), episodes=[0]).meta
    assert sorted(int(s["index"]) for s in samples) == list(range(meta.episodes[3].dataset_from_index))
    assert np.all([read_frame_code(s[CAM0])[0] == int(s["index"]) for s in samples])


@pytest.mark.slow
def test_dl_run_serves_nan_with_a_warning_and_refuses_it_with_strict(broken, tmp_path):
    root = broken(WARNED["nan_and_inf"][0])
    fast = ["--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4",
            "--num-workers", "0", "--ceiling-s", "0"]
    served = dl_subprocess("run", "--root", root, *fast, "--out-dir", tmp_path / "a", cache_dir=tmp_path)
    assert served.returncode == 0, served.stdout + served.stderr
    warned = [line for line in (served.stdout + served.stderr).splitlines() if "NaN or inf" in line]
    assert warned and all(line.startswith("warning: ") for line in warned)
    refused = dl_subprocess("run", "--root", root, "--strict", *fast, "--out-dir", tmp_path / "b", cache_dir=tmp_path)
    assert refused.returncode == 1 and "refused (strict)" in refused.stdout and "Traceback" not in refused.stdout
