"""A real S3-protocol server on loopback: moto's `ThreadedMotoServer` on 127.0.0.1 and a free port, with
helpers to upload a dataset folder and to build s3fs storage options pointing at it.

    with S3Server() as s3:
        url = s3.upload(dataset_dir, "bucket", "dataset")          # s3://bucket/dataset
        dl.make_dataset(url, source="bucket", source_options={"storage_options": s3.storage_options()})

Known facts: moto's server closes the connection after every response; passing `region_name` in
`client_kwargs` makes bucket creation fail (the default region is used).
"""

from pathlib import Path

CREDENTIALS = {"key": "testing", "secret": "testing"}
"""moto accepts any credentials; these keep botocore from looking for real ones."""


class S3Server:
    """moto's S3 server in a daemon thread (a context manager).

    Attributes:
        endpoint_url: `http://127.0.0.1:PORT`.
    """

    def __init__(self):
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""

    def __enter__(self) -> "S3Server":
        self._server.start()
        self.endpoint_url = f"http://127.0.0.1:{self._server.get_host_and_port()[1]}"
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()

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
