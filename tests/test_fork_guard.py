"""dl.kits.remote.fork_guard: a fork (a DataLoader starting its workers) waits for the requests other threads
have in flight, so no child starts with a lock a request held (huggingface_hub's HTTP client hung forked workers
so); a remote source's requests run inside the guard; a child never runs its parent's session finalizers."""

import multiprocessing
import os
import threading
import weakref

import s3fs

from dl.kits.remote import fork_guard
from dl.plugins.remote.bucket import bucket_source


def _exit_with(done: threading.Event) -> None:
    os._exit(0 if done.is_set() else 1)  # the child's copy of the event, as it was at the fork


def test_a_fork_waits_for_the_request_in_flight():
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def request():
        with fork_guard.request_in_flight():
            inside.set()
            assert release.wait(timeout=30)
            done.set()

    thread = threading.Thread(target=request)
    thread.start()
    assert inside.wait(timeout=30) and fork_guard.requests_in_flight() == 1
    threading.Timer(0.3, release.set).start()  # ends the request while the fork below waits for it
    child = multiprocessing.get_context("fork").Process(target=_exit_with, args=(done,))
    child.start()
    child.join(timeout=60)
    thread.join(timeout=30)
    assert child.exitcode == 0  # the child was forked after the request had ended
    assert fork_guard.requests_in_flight() == 0


def test_a_remote_source_requests_inside_the_guard(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"0123456789")
    source = bucket_source(f"file://{tmp_path}", prefetch=False)
    seen = []
    source.request_range = lambda fs, path, start, end: seen.append(fork_guard.requests_in_flight()) or b"23"
    assert source.read_bytes("f.bin", 2, 4) == b"23" and seen == [1]


def _session_finalizers() -> int:
    return sum(info.func.__name__ == "close_session" for info in weakref.finalize._registry.values())


def _report_finalizers(conn) -> None:
    conn.send(_session_finalizers())
    conn.close()


def test_a_forked_child_never_closes_its_parents_filesystem_sessions():
    # s3fs closes an instance's HTTP session from a finalizer that waits for the instance's event loop; in a forked
    # child no thread runs that loop, so the finalizer stalled the child a whole second when garbage collection
    # reached the inherited instance. The session needs no server to exist: nothing here sends a request.
    fs = s3fs.S3FileSystem(endpoint_url="http://127.0.0.1:9", key="k", secret="s", skip_instance_cache=True)
    fs.connect()
    assert _session_finalizers() >= 1
    parent, child_end = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_report_finalizers, args=(child_end,))
    child.start()
    assert parent.poll(60)
    in_child = parent.recv()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert in_child == 0  # detached in the child
    assert _session_finalizers() >= 1  # the parent still closes its own
