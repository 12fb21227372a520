"""CPU per ranged GET on the loopback S3 server (`dl.testing.s3_server`), by object size and range size: the server's
(moto's process) and the client's (`cat_file` of the `bucket` source's s3fs filesystem, in this process, whose event
loop thread does the work). `remote_vs_local.py` runs that server on the cores of the run it measures, so every
millisecond here is taken from decoding; a real S3 endpoint's CPU is not the client's.

    .venv/bin/python benchmarks/s3_request_cost.py                     # 2 and 18 MB objects; 128 KiB, 1 and 4 MiB
    .venv/bin/python benchmarks/s3_request_cost.py --objects-mb 3 --ranges-kib 64,128 --requests 100
"""

import argparse
import os
import resource
import time

import psutil

from dl.plugins.remote.bucket import bucket_filesystem
from dl.testing.s3_server import S3Server


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects-mb", default="2,18", help="object sizes, MB (comma-separated)")
    parser.add_argument("--ranges-kib", default="128,1024,4096", help="range sizes, KiB (comma-separated)")
    parser.add_argument("--requests", type=int, default=60, help="GETs per object and range size, one at a time")
    args = parser.parse_args()
    objects = [int(x) for x in args.objects_mb.split(",")]
    ranges = [int(x) << 10 for x in args.ranges_kib.split(",")]
    with S3Server() as s3:
        uploads = s3.filesystem()
        uploads.mkdir("bench")
        for mb in objects:
            uploads.pipe_file(f"bench/o{mb}", os.urandom(mb << 20))
        fs, _ = bucket_filesystem("s3://bench", s3.storage_options())
        fs.cat_file(f"bench/o{objects[0]}", start=0, end=1)  # the client is made (its first request costs more)
        server = psutil.Process(s3.pid)
        for mb in objects:
            for size in ranges:
                span = max((mb << 20) - size, 1)
                server_s, client_s, t0 = sum(server.cpu_times()[:2]), own_cpu_s(), time.perf_counter()
                for i in range(args.requests):
                    start = (i * 393_216) % span
                    fs.cat_file(f"bench/o{mb}", start=start, end=start + size)
                per_get = [1e3 * x / args.requests for x in (sum(server.cpu_times()[:2]) - server_s,
                                                              own_cpu_s() - client_s, time.perf_counter() - t0)]
                print(f"object {mb} MB, range {size >> 10} KiB, per GET: server {per_get[0]:.2f} ms CPU, client "
                      f"{per_get[1]:.2f} ms CPU, {per_get[2]:.1f} ms wall", flush=True)


if __name__ == "__main__":
    main()
