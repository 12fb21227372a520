"""Ctrl-C and SIGTERM. dl.bench.signals in a forked child (a DataLoader worker): a Ctrl-C that reaches it, even
before it could catch anything (multiprocessing's bootstrap, before torch's worker loop), is left to its parent, which
got the same signal and stops its workers: the child carries on and ends with exit code 0, no traceback. SIGTERM
still ends it. The parent keeps its own handling: its first SIGINT raises KeyboardInterrupt. And `dl run` given a
terminal's Ctrl-C at points of its start (dl's imports, the run process's `import torch`, its phases) stops with one
line, exit code 130, and no traceback from any process."""

import subprocess
import sys
import time

import pytest

SCRIPT = """
import multiprocessing, os, signal, time
from dl.bench.signals import stop_once_on_signals

stop_once_on_signals()


def interrupted():
    os.kill(os.getpid(), signal.SIGINT)  # before the child has set anything up, as a Ctrl-C during its start
    time.sleep(0.2)  # the handler runs here
    print("child carried on", flush=True)


def terminated():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    print("child outlived SIGTERM", flush=True)


fork = multiprocessing.get_context("fork")
for target in (interrupted, terminated):
    child = fork.Process(target=target)
    child.start()
    child.join()
    print(target.__name__, child.exitcode, flush=True)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    print("parent interrupted", flush=True)
"""


def test_a_forked_child_leaves_ctrl_c_to_its_parent_and_ends_on_sigterm():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == ["child carried on", "interrupted 0", "terminated -15", "parent interrupted", ""]
    assert "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------- Ctrl-C at a terminal, at points of `dl run`'s start

PAUSE = '''
import os, sys, time

_module, _process, _marker = os.environ["DL_TEST_PAUSE"].split(":")


class _PauseImport:
    """Holds the first import of a module in one process (the run process or dl), after writing a marker: an
    interrupt then lands while that process imports."""

    def find_spec(self, name, path=None, target=None):
        runner = "dl.bench.runner" in sys.orig_argv
        if name == _module and runner == (_process == "runner"):
            sys.meta_path.remove(self)
            with open(_marker, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(120)  # the interrupt comes first
        return None


sys.meta_path.insert(0, _PauseImport())
'''
"""A sitecustomize.py that pauses one process's import of one module (DL_TEST_PAUSE=MODULE:PROCESS:MARKER_FILE)."""


def _interrupt_dl_run(small_dataset, tmp_path, *, pause: str | None = None, line: str | None = None):
    """Start `dl run` as a terminal would, in a process group of its own, wait for `pause` (MODULE:PROCESS: that
    process is importing MODULE) or for a progress `line` on stderr, then send SIGINT to the group, as Ctrl-C does
    (every process of the terminal's foreground group gets it). Returns (exit code, stderr, the pid that paused)."""
    import os
    import signal

    from cli_helpers import DL, FAST, env_with

    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PAUSE)
    marker = tmp_path / "paused"
    env = env_with(DL_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(hook),
                   DL_TEST_PAUSE=f"{pause or 'none:none'}:{marker}")
    args = [str(DL), "run", "--root", str(small_dataset), *FAST, "--duration", "60", "--num-workers", "1",
            "--out-dir", str(tmp_path / "out")]  # a window long enough that the run is still going when interrupted
    with open(tmp_path / "stdout", "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        seen = []
        try:
            if line is None:
                while not marker.is_file() or not marker.read_text():
                    assert proc.poll() is None, proc.stderr.read()
                    time.sleep(0.05)
            else:
                for got in proc.stderr:
                    seen.append(got)
                    if line in got:
                        break
                else:
                    raise AssertionError(f"dl run ended before {line!r}: {''.join(seen)}")
            os.killpg(proc.pid, signal.SIGINT)
            rest = proc.communicate(timeout=120)[1]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    paused = int(marker.read_text()) if marker.is_file() else None
    return proc.returncode, "".join(seen) + rest, paused


def _assert_stopped_cleanly(code, stderr, pid=None):
    import psutil

    assert code == 130, stderr
    assert stderr.rstrip().endswith("Error: interrupted (Ctrl-C); runs in progress were stopped."), stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    if pid is not None:  # the process that was interrupted while importing is gone (or a reaped zombie)
        try:
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass


def test_ctrl_c_while_the_run_process_imports_torch_prints_no_traceback(small_dataset, tmp_path):
    code, stderr, pid = _interrupt_dl_run(small_dataset, tmp_path, pause="torch:runner")
    _assert_stopped_cleanly(code, stderr, pid)


@pytest.mark.slow
@pytest.mark.parametrize(("pause", "line"), [
    ("dl.bench.session:dl", None),  # dl itself, importing what `dl run` needs
    ("click:dl", None),  # dl at its very start, before its commands are imported
    (None, "prepare 0/1"),  # the run process builds the dataset
    (None, "single-process 0/"),  # the run process times its pass without workers
    (None, "steady window 0/"),  # the DataLoader's worker runs beside it
], ids=["dl-imports", "dl-starts", "run-prepares", "run-single-process", "run-window"])
def test_ctrl_c_at_other_points_of_a_run_prints_no_traceback(small_dataset, tmp_path, pause, line):
    code, stderr, pid = _interrupt_dl_run(small_dataset, tmp_path, pause=pause, line=line)
    _assert_stopped_cleanly(code, stderr, pid)
