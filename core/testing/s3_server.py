"""A real S3-protocol server on loopback: moto's server on 127.0.0.1 and a free port, in a process of its own,
with helpers to upload a dataset folder and to build s3fs storage options pointing at it.

    with S3Server() as s3:
        url = s3.upload(dataset_dir, "bucket", "dataset")          # s3://bucket/dataset
        dl.make_dataset(url, source="bucket", source_options={"storage_options": s3.storage_options()})

The server runs as `python -m dl.testing.s3_server`, as a real server runs beside its clients: it does not share
the interpreter of the process that started it (a benchmark's proxies run there), and its CPU is counted apart
(`pid`). It stops when that process closes its stdin, or exits.

Known facts:
- moto's own server (`ThreadedMotoServer`) speaks HTTP/1.0 and closes the connection after every response, which
  S3 does not: each request would cost a new connection through the client, the fault proxy and moto. This server
  runs moto's application over HTTP/1.1 instead, connections kept alive (open50 through `bucket`, 20 ms /
  80 Mbit/s, 2 workers, interleaved: 1407 and 1466 samples/s against 1320 and 1406; the layout 416 against 417).
- Passing `region_name` in `client_kwargs` makes bucket creation fail (the default region is used).
- moto reads an object's every byte for each ranged GET, so its CPU per request grows with the object's size
  (measured here: 1.7-1.8 ms per 96 KiB GET of a 1 MB object, 3.7-3.8 ms of a 20 MB one).
"""

import select
import subprocess
import sys
from pathlib import Path

CREDENTIALS = {"key": "testing", "secret": "testing"}
"""moto accepts any credentials; these keep botocore from looking for real ones."""
STARTUP_S = 60.0
"""Seconds the server process may take to start (importing moto) or to stop."""


class S3Server:
    """moto's S3 server in a child process (a context manager).

    Attributes:
        endpoint_url: `http://127.0.0.1:PORT`.
        pid: the server's process id.

    Raises (entering): RuntimeError when the server did not start within `STARTUP_S`.
    """

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self.endpoint_url, self.pid = "", 0

    def __enter__(self) -> "S3Server":
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

    def filesystem(self):
        """An s3fs filesystem on this server (fresh, not from fsspec's instance cache)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())

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


def serve() -> None:
    """The server process: start moto's WSGI application (as moto's `ThreadedMotoServer` does, a thread per
    connection) with connections kept alive, print its port, serve until stdin ends (the parent closed it or
    exited)."""
    import logging
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class KeepAlive(MotoRequestHandler):
        """moto's request handler speaking HTTP/1.1: a connection serves request after request, as S3's do."""

        protocol_version = "HTTP/1.1"

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
    server = make_server("127.0.0.1", 0, DomainDispatcherApplication(create_backend_app), threaded=True,
                         request_handler=KeepAlive)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(server.server_address[1], flush=True)
    sys.stdin.buffer.read()
    server.shutdown()
    thread.join()


if __name__ == "__main__":
    serve()
