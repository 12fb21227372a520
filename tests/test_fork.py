"""A fork by user code never waits on dl (issue 66): with a remote source's request held in flight by a loopback proxy
the test controls (in front of moto's S3 server), `os.fork()` returns before the request ends, and the child reads
through the same source at once (its own locks, clients and threads: `dl.kits.process_local`). Per-process values
are made once per process and never cross a fork or a pickle."""

import os
import pickle
import signal
import socket
import threading
from urllib.parse import urlsplit

from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.kits.process_local import ProcessLocal

WATCHDOG_S = 30.0
"""Releases the held request if the test does not: a fork that waited for it would then return after it ended."""


class Gate:
    """A loopback TCP proxy to `target` (`http://host:port`) that holds the first ranged GET before forwarding it:
    `held` is set once it holds one, and it goes on when `release` is set. Everything else passes through."""

    def __init__(self, target: str):
        url = urlsplit(target)
        self.target = (url.hostname, url.port)
        self.held, self.release = threading.Event(), threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(self.target)
        threading.Thread(target=_pipe, args=(server, client), daemon=True).start()
        _pipe(client, server, self._hold)

    def _hold(self, data: bytes) -> None:
        if data.startswith(b"GET ") and b"\r\nrange:" in data.lower() and not self.held.is_set():
            self.held.set()
            self.release.wait()


def _pipe(src: socket.socket, dst: socket.socket, before=None) -> None:
    try:
        while data := src.recv(64 << 10):
            if before is not None:
                before(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_fork_returns_while_a_request_is_in_flight_and_the_child_reads_at_once(s3, small_dataset):  # noqa: F811
    gate = Gate(s3.endpoint_url)
    try:
        source = s3_source(s3, upload(s3, small_dataset), endpoint_url=gate.endpoint_url)
        rel = sorted(p for p in source.list_files("videos") if p.endswith(".mp4"))[0]
        expected = (small_dataset / rel).read_bytes()[:4096]
        order, got = [], []

        def read() -> None:  # a download thread's request, held by the gate
            got.append(source.read_bytes(rel, 0, 4096))
            order.append("request ended")

        reader = threading.Thread(target=read)
        reader.start()
        assert gate.held.wait(timeout=WATCHDOG_S)
        watchdog = threading.Timer(WATCHDOG_S, gate.release.set)
        watchdog.start()
        pid = os.fork()
        if pid == 0:  # the child: a request of its own through the same source, at once
            signal.alarm(int(WATCHDOG_S))  # else killed: the exit status below fails the test instead of hanging it
            try:
                code = 0 if source.read_bytes(rel, 0, 4096) == expected else 1
            except BaseException:
                code = 2
            os._exit(code)
        order.append("forked")
        _, status = os.waitpid(pid, 0)  # the child read while the parent's request was still held
        order.append("child exited")
        gate.release.set()
        watchdog.cancel()
        reader.join(timeout=WATCHDOG_S)
        assert order == ["forked", "child exited", "request ended"]
        assert os.waitstatus_to_exitcode(status) == 0
        assert got == [expected]
    finally:
        gate.close()


def test_a_process_local_value_is_made_once_per_process_and_not_pickled():
    made = ProcessLocal(list)
    mine = made.get()
    mine.append("parent")
    assert made.get() is mine and made.here() is mine
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's value is not its own
        fresh = made.here() is None and made.get() == [] and made.get() is made.get()
        os.write(write, b"1" if fresh else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read)
    assert made.get() == ["parent"]  # the parent's is untouched
    copy = pickle.loads(pickle.dumps(made))
    assert copy.here() is None and copy.get() == []
