"""dl.testing.s3_server.S3Server: moto in a process of its own, serving ranged reads on loopback, gone when its
context ends, and when the process that started it dies (its stdin closes)."""

import os
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import boto3
import botocore.exceptions
import psutil
import pytest

from dl.testing.fault_proxy import FaultProxy
from dl.testing.s3_server import CREDENTIALS, S3Server


def test_serves_ranges_from_its_own_process_and_stops_with_its_context(tmp_path):
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 4)
    with S3Server() as s3:
        assert s3.pid != os.getpid() and psutil.Process(s3.pid).ppid() == os.getpid()
        url = s3.upload(tmp_path, "tests", "ds")
        assert s3.filesystem().cat_file(f"{url}/a.bin", start=300, end=310) == bytes(range(44, 54))
        address = urlsplit(s3.endpoint_url)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((address.hostname, address.port), timeout=5).close()


def test_keeps_connections_alive_across_ranged_reads(tmp_path):
    # S3 answers request after request on one connection; a server closing each one (moto's own, HTTP/1.0) makes
    # every ranged read a new connection through the client, a benchmark's proxy and the server
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 64)
    with S3Server() as s3:
        url = s3.upload(tmp_path, "tests", "ds")
        with FaultProxy(s3.endpoint_url) as proxy:
            fs = s3.filesystem(proxy.endpoint_url)
            for start in range(0, 8000, 1000):  # one after another: one connection serves them all
                assert fs.cat_file(f"{url}/a.bin", start=start, end=start + 10) == bytes(
                    (start + i) % 256 for i in range(10))
            assert proxy.requests >= 8 and proxy.connections == 1


def test_stops_when_the_process_that_started_it_dies():
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom dl.testing.s3_server import S3Server\n"
        "with S3Server() as s3:\n    print(s3.pid, flush=True)\n    time.sleep(600)\n")], stdout=subprocess.PIPE)
    server = psutil.Process(int(parent.stdout.readline()))
    parent.send_signal(signal.SIGKILL)  # no clean-up runs in the parent
    parent.wait(timeout=30)
    parent.stdout.close()
    deadline = time.monotonic() + 60
    while not ended(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ended(server)


def ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


RANGED_GETS = [
    ("bytes=1000-1009", 206, (bytes(range(256)) * 4096)[1000:1010]),   # a range: its bytes alone
    ("bytes=-5", 206, bytes(range(251, 256))),                          # a suffix range
    ("bytes=1048570-", 206, bytes(range(250, 256))),                    # an open range to the end
    ("bytes=0-1,5-6", 200, bytes(range(256)) * 4096),                   # several ranges: S3 sends the whole object
    ("bytes=2000000-", 416, None),                                      # past the end
]


def test_answers_ranged_gets_as_s3_does(tmp_path):
    # the server reads a range's bytes alone (not moto's whole object); what it answers is S3's answer
    (tmp_path / "a.bin").write_bytes(bytes(range(256)) * 4096)  # 1 MiB, past moto's in-memory buffer
    answers = []
    with S3Server() as s3:
        s3.upload(tmp_path, "tests", "ds")
        client = boto3.client("s3", endpoint_url=s3.endpoint_url, region_name="us-east-1",
                              aws_access_key_id=CREDENTIALS["key"], aws_secret_access_key=CREDENTIALS["secret"])
        for header, _, _ in RANGED_GETS:
            try:
                response = client.get_object(Bucket="tests", Key="ds/a.bin", Range=header)
                answers.append((header, response["ResponseMetadata"]["HTTPStatusCode"], response["Body"].read()))
            except botocore.exceptions.ClientError as exc:
                answers.append((header, exc.response["ResponseMetadata"]["HTTPStatusCode"], None))
    assert answers == RANGED_GETS
