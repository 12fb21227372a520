"""Contention: the share of the machine's CPU other processes took while a run measured (`dl.bench.contention`),
the busy rule on given counters, and a real `dl run` beside a process that keeps a core busy."""

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import FAST, dl_subprocess

from dl.bench.contention import BUSY_SHARE, ContentionMonitor, CpuCounters, busy_line, contention


def test_idle_machine_is_not_busy():
    # 10 s on 2 cores: the run used 1.8 cores, the machine 1.9 in all: others 0.1 core
    figures = contention(CpuCounters(0.0, 100.0, 50.0), CpuCounters(10.0, 119.0, 68.0), cpu_count=2, load_1m=1.9)
    assert figures["cores_used_by_run"] == 1.8 and figures["cores_used_by_others"] == 0.1
    assert figures["others_share"] == 0.05 and not figures["busy"] and figures["load_1m"] == 1.9


def test_others_taking_a_core_of_two_is_busy():
    figures = contention(CpuCounters(0.0, 0.0, 0.0), CpuCounters(4.0, 8.0, 3.2), cpu_count=2)
    assert figures["cores_used_by_others"] == 1.2 and figures["others_share"] == 0.6 > BUSY_SHARE
    assert figures["busy"]
    line = busy_line({"single-process": contention(CpuCounters(0, 0, 0), CpuCounters(1, 1, 1), 2),
                      "steady window": figures}, cpu_count=2)
    assert line.startswith("machine busy: other processes used up to 1.2 of 2 cores (steady window)")


def test_counters_read_apart_never_give_negative_cores():
    figures = contention(CpuCounters(0.0, 10.0, 0.0), CpuCounters(1.0, 10.5, 0.9), cpu_count=4)
    assert figures["cores_used_by_others"] == 0.0 and not figures["busy"]
    assert busy_line({"steady window": figures}, 4) is None


def test_the_monitor_counts_its_own_tree_work():
    with ContentionMonitor(period_s=0.05) as machine:
        machine.phase("spin")
        child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                  "while time.process_time() - t < 0.6: pass"])
        child.wait()
        machine.phase("after")
    spin = machine.phases["spin"]
    assert spin["cores_used_by_run"] * spin["wall_s"] >= 0.4  # the child's 0.6 s of CPU, seen before it ended
    assert set(machine.phases) == {"spin", "after"}


@pytest.mark.slow
def test_dl_run_beside_busy_cores_is_marked_busy(small_dataset, tmp_path):
    """Processes keeping all cores but one busy (one on this 2-core kind of machine): more than a quarter of any
    machine's cores."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(max(1, (os.cpu_count() or 2) - 1))]
    try:
        proc = dl_subprocess("run", "--root", small_dataset, *FAST, "--num-workers", "0", "--out-dir", tmp_path / "out",
                             cache_dir=tmp_path / "cache")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert proc.returncode == 0, proc.stderr
    (path,) = [p for p in (tmp_path / "out").glob("*.json")]
    load = json.loads(path.read_text())["machine_load"]
    steady = load["phases"]["steady window"]
    assert load["busy"] and steady["busy"] and steady["cores_used_by_others"] >= 0.5
    assert "machine busy: other processes used" in proc.stdout and " busy" in proc.stdout
