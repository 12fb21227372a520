"""A file read from a remote source outside its cached ranges streams ranged requests whose size grows while the
reads stay sequential (dl.kits.remote.views.RangeReader): a decoder's probe of a video it has not admitted fetches
a few 64 KiB ranges, not a 1 MiB block per place it looks, and a whole file still takes few requests. Against a
real S3 server (moto) on loopback."""

import math
import os

from remote_helpers import s3, s3_source, upload  # noqa: F401  (s3 is a fixture)

from dl.kits.mp4_index import READ_AHEAD_BYTES

SIZE = 3 * (1 << 20) + 12345
BLOCK = 1 << 20


def blob_source(s3, tmp_path):  # noqa: F811
    data = os.urandom(SIZE)
    (tmp_path / "blob.bin").write_bytes(data)
    source = s3_source(s3, upload(s3, tmp_path), block_size=BLOCK)
    source.video_input("blob.bin").close()  # lists the folder
    source.reset_stats()
    return source, data


def test_a_probe_fetches_small_ranges_where_it_looks(s3, tmp_path):  # noqa: F811
    source, data = blob_source(s3, tmp_path)
    f = source.video_input("blob.bin")
    f.seek(SIZE - 100)
    assert f.read(100) == data[-100:]  # an index at the end
    f.seek(0)
    got = b"".join(f.read(READ_AHEAD_BYTES) for _ in range(4))  # the head, as a decoder reads it
    assert got == data[: 4 * READ_AHEAD_BYTES]
    stats = source.stats()
    assert stats["requests"] == 4
    assert stats["bytes_fetched"] == 100 + 7 * READ_AHEAD_BYTES  # 64 KiB, then 128, then 256


def test_a_whole_file_read_in_order_takes_few_requests(s3, tmp_path):  # noqa: F811
    source, data = blob_source(s3, tmp_path)
    for reader, first in ((source.video_input, READ_AHEAD_BYTES), (source.open, BLOCK)):
        source.reset_stats()
        with reader("blob.bin") as f:
            assert b"".join(iter(lambda: f.read(READ_AHEAD_BYTES), b"")) == data
        growth = int(math.log2(BLOCK // first))  # requests below a block while the size grows
        assert source.stats()["requests"] <= math.ceil(SIZE / BLOCK) + growth
        assert source.stats()["bytes_fetched"] == SIZE
