"""dl changes no process-wide state by being imported or used as a library (the warning format, at-fork callbacks),
and its commands print a dataset's warnings once per command, not once per run process."""

import subprocess
import sys

import pytest
from cli_helpers import FAST, dl_subprocess


def test_import_and_a_dataset_leave_the_warning_format_alone(small_dataset):
    code = ("import warnings\nformat = warnings.formatwarning\nimport dl\nassert warnings.formatwarning is format\n"
            f"ds = dl.make_dataset({str(small_dataset)!r})\nds[0]\nassert warnings.formatwarning is format\n"
            "print('unchanged')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "unchanged", done.stderr


def test_import_and_a_dataset_register_nothing_at_fork(small_dataset):
    """No fork of the user's process runs dl code (a fork never waits on dl): every at-fork callback registered while
    importing dl, its remote sources and decoders and reading a sample is another library's."""
    code = ("import os\nregistered = []\nkeep = os.register_at_fork\n"
            "def record(**callbacks):\n"
            "    registered.extend(getattr(f, '__module__', None) or '' for f in callbacks.values())\n"
            "    keep(**callbacks)\nos.register_at_fork = record\n"
            "import dl, dl.kits.remote.source, dl.plugins.remote.bucket, dl.plugins.remote.hub, dl.plugins.map\n"
            f"ds = dl.make_dataset({str(small_dataset)!r})\nds[0]\n"
            "print(sorted({m for m in registered if m == 'dl' or m.startswith('dl.')}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


@pytest.mark.slow
def test_a_codec_that_info_json_gets_wrong_is_said_once_per_command(open50, tmp_path):
    proc = dl_subprocess("run", "--root", open50, "--episodes", "0,3", *FAST, "--ceiling-s", "0", "--num-workers",
                         "0,1", "--out-dir", tmp_path / "out", cache_dir=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    said = (proc.stdout + proc.stderr).count("says camera image is 'h264'")
    assert said == 1, proc.stderr
