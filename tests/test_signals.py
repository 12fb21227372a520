"""dl.bench.signals in a forked child (a DataLoader worker): a Ctrl-C that reaches it, even before it could catch
anything (multiprocessing's bootstrap, before torch's worker loop), is left to its parent, which got the same
signal and stops its workers: the child carries on and ends with exit code 0, no traceback. SIGTERM still ends it.
The parent keeps its own handling: its first SIGINT raises KeyboardInterrupt."""

import subprocess
import sys

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
