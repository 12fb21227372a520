"""A real S3-protocol server on loopback: moto's server on 127.0.0.1 and a free port, in a process of its own,
with helpers to upload a dataset folder and to build s3fs storage options pointing at it.

    with S3Server() as s3:
        url = s3.upload(dataset_dir, "bucket", "dataset")          # s3://bucket/dataset
        dl.make_dataset(url, source="bucket", source_options={"storage_options": s3.storage_options()})

The server runs as `python -m dl.testing.s3_server`, as a real server runs beside its clients: it does not share
the interpreter of the process that started it (a benchmark's proxies run there), and its CPU is counted apart
(`pid`). It stops when that process closes its stdin, or exits.

Known facts:
- moto's own server (`ThreadedMotoServer`, werkzeug's) closes the connection after every response, which S3 does
  not: each request would cost a new connection through the client, the fault proxy and moto. werkzeug sends
  `Connection: close` on every response, even as HTTP/1.1, so this server runs moto's WSGI application under
  waitress, which keeps connections alive (`benchmarks/results/internals.md`, "Loopback S3 server").
- Passing `region_name` in `client_kwargs` makes bucket creation fail (the default region is used).
- It serves moto's S3 application alone (`create_backend_app("s3")`), as an S3 endpoint serves S3. moto's
  dispatcher of every AWS service (`DomainDispatcherApplication`) finds each request's service anew: it infers it
  from the request (its signature, else its body and path), then looks it up by listing moto's ~200 service
  packages on disk, under one lock that all server threads share. A real endpoint does none of it, and here the
  server shares the client's cores.
- moto reads an object's every byte for each ranged GET and then slices the range, so its CPU per request grows with
  the object's size (`benchmarks/results/internals.md`, "Loopback S3 server"). An S3 endpoint reads the range alone,
  and its CPU is not the client's: this server hands moto's range handling a view that reads only the range's bytes
  (`_read_ranges_only`).
"""

import select
import subprocess
import sys
import threading
from pathlib import Path

from ..contracts.extras import require

CREDENTIALS = {"key": "testing", "secret": "testing"}
"""moto accepts any credentials; these keep botocore from looking for real ones."""
STARTUP_S = 60.0
"""Seconds the server process may take to start (importing moto) or to stop."""
SERVER_THREADS = 8
"""Requests moto handles at once (waitress's worker threads; more connections wait in line, kept open)."""


class S3Server:
    """moto's S3 server in a child process (a context manager).

    Attributes:
        endpoint_url: `http://127.0.0.1:PORT`.
        pid: the server's process id.

    Raises (entering): DlError when moto or waitress (the extra `testing`) is missing; RuntimeError when the server
    did not start within `STARTUP_S`.
    """

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self.endpoint_url, self.pid = "", 0

    def __enter__(self) -> "S3Server":
        for module in ("moto", "waitress"):
            require(module, "testing", "the loopback S3 server (dl run --scenario stream_bucket, dl.testing.serve)")
        self._process = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
        ready, _, _ = select.select([self._process.stdout], [], [], STARTUP_S)
        line = self._process.stdout.readline() if ready else b""
        if not line.strip().isdigit():
            self.__exit__()
            raise RuntimeError(f"moto's S3 server did not start within {STARTUP_S:.0f} s (its errors are above).")
        self.endpoint_url, self.pid = f"http://127.0.0.1:{int(line)}", self._process.pid
        return self

    def __exit__(self, *exc) -> None:
        self._process.stdin.close()  # the server stops at end of input
        try:
            self._process.wait(timeout=STARTUP_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process.stdout.close()

    def storage_options(self, endpoint_url: str | None = None) -> dict:
        """s3fs options for this server (or for `endpoint_url`, e.g. a proxy in front of it)."""
        return {**CREDENTIALS, "endpoint_url": endpoint_url or self.endpoint_url}

    def filesystem(self, endpoint_url: str | None = None):
        """An s3fs filesystem on this server, or through `endpoint_url` (e.g. a proxy in front of it); fresh, not
        from fsspec's instance cache."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options(endpoint_url))

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Create `bucket` if needed and copy every file under `folder` to `s3://bucket/prefix/...`; returns
        that URL."""
        fs = self.filesystem()
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                fs.pipe_file(f"{bucket}/{prefix}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        return f"s3://{bucket}/{prefix}"


class _ObjectBytes:
    """An object's bytes as moto's ranged GET uses them (`len`, one slice), read from its buffer only where sliced."""

    def __init__(self, key):
        self.key = key

    def __len__(self) -> int:
        return self.key.size

    def __getitem__(self, where: slice) -> bytes:
        start, stop, _ = where.indices(self.key.size)
        with self.key.lock:
            self.key._value_buffer.seek(start)
            return self.key._value_buffer.read(max(0, stop - start))

    def __iter__(self):  # the whole object, where moto answers a range it does not serve with all of it
        yield self[:]


def _read_ranges_only() -> None:
    """Make moto's GET with a `Range` header read the range's bytes only (`_ObjectBytes`), not the whole object. It
    wraps moto 5's `S3Response.get_object` and reads a key's `_value_buffer`; a moto without them is left as it is
    (`tests/test_s3_server.py` checks what a ranged GET answers either way)."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    value = getattr(FakeKey, "value", None)
    if not (isinstance(value, property) and "_value_buffer" in value.fget.__code__.co_names
            and hasattr(S3Response, "get_object")):
        return
    ranged, get_object = threading.local(), S3Response.get_object

    def object_bytes(key):
        return _ObjectBytes(key) if getattr(ranged, "on", False) else value.fget(key)

    def ranged_get_object(self):
        ranged.on = bool(self.headers.get("range"))
        try:
            return get_object(self)
        finally:
            ranged.on = False

    FakeKey.value = property(object_bytes, value.fset)
    S3Response.get_object = ranged_get_object


def serve() -> None:
    """The server process: serve moto's S3 WSGI application with waitress on a free port (HTTP/1.1, connections
    kept alive), print the port, serve until stdin ends (the parent closed it or exited)."""
    import logging

    from moto.moto_server.werkzeug_app import create_backend_app
    from waitress.server import create_server

    logging.getLogger("waitress").setLevel(logging.ERROR)  # no queue-depth warnings on stderr
    _read_ranges_only()
    server = create_server(create_backend_app("s3"), host="127.0.0.1", port=0, threads=SERVER_THREADS,
                           connection_limit=1000)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    print(server.effective_port, flush=True)
    sys.stdin.buffer.read()
    server.task_dispatcher.shutdown()  # requests in hand finish before the socket and its trigger close
    server.close()


if __name__ == "__main__":
    serve()
