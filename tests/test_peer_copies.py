"""dl.kits.remote.peer_copies: a cache copies the bytes this host's other processes downloaded instead of fetching
them again. Property: whatever ranges the peers hold, `fill` writes exactly the file's bytes, copies every byte
they cover and downloads only the rest (each gap once). A range one peer's file holds whole is a hard link to it
(no byte copied), and stays readable when the peer deletes its file. A peer's file gone before it is opened, a
download still in progress, another file version and another user's folder are never copied from; the caches of
one process (a mixture's sources) have a run folder each. Against moto: a second process reading the episodes a
first one holds fetches nothing, links their ranges and decodes the same frames as the local file."""

import multiprocessing
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)
from test_remote_ranges import REL, long_video, span  # noqa: F401 (fixture)

from dl.kits.remote import peer_copies
from dl.kits.remote.file_cache import Piece, PrefetchCache
from dl.kits.remote.peer_copies import PeerCopies, range_name
from dl.kits.remote.run_folders import host_name
from dl.plugins.cpu_decoder import CpuDecoder

CONTENT = bytes(range(256)) * 8  # 2048 bytes, every offset's byte known
NAME = "v1"


def peer_folder(base: Path, n: int) -> Path:
    """The run folder of another cache on this host (a process that is gone: its files are whole all the same)."""
    folder = base / f"run-{host_name()}-999999999-1.{n}" / NAME
    folder.mkdir(parents=True)
    return folder


def hold(folder: Path, start: int, end: int, copy: int = 0) -> Path:
    path = folder / range_name(start, end, copy)
    path.write_bytes(CONTENT[start:end])
    return path


def fill(peers: PeerCopies, start: int, end: int, name: str = NAME) -> tuple[bytes, int, list[tuple[int, int]]]:
    """(the bytes written, the bytes copied, the ranges downloaded) of one `fill`."""
    downloads = []
    with tempfile.TemporaryFile() as out:
        def download(lo, hi):
            downloads.append((lo, hi))
            out.write(CONTENT[lo:hi])

        copied = peers.fill(name, start, end, out, download)
        out.seek(0)
        return out.read(), copied, downloads


spans = st.tuples(st.integers(0, 2047), st.integers(1, 400)).map(lambda t: (t[0], min(2048, t[0] + t[1])))


@settings(max_examples=examples(60), deadline=None)
@given(held=st.lists(st.tuples(st.integers(0, 2), spans), max_size=8), wanted=spans)
def test_fill_copies_every_covered_byte_and_downloads_only_the_gaps(held, wanted):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        folders = {}
        for copy, (n, (a, b)) in enumerate(held):
            if n not in folders:
                folders[n] = peer_folder(base, n)
            hold(folders[n], a, b, copy)
        start, end = wanted
        data, copied, downloads = fill(PeerCopies(base, base / "mine"), start, end)
    assert data == CONTENT[start:end]
    covered = {x for _, (a, b) in held for x in range(max(a, start), min(b, end))}
    assert copied == len(covered)
    downloaded = [x for lo, hi in downloads for x in range(lo, hi)]
    assert sorted(downloaded) == sorted(set(range(start, end)) - covered)  # each uncovered byte, once
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(downloads, downloads[1:], strict=False))  # whole gaps, in order


def test_what_is_not_whole_or_not_the_same_version_is_never_copied(tmp_path):
    folder = peer_folder(tmp_path, 0)
    hold(folder, 0, 100)
    (folder / (range_name(100, 200, 1) + ".tmp")).write_bytes(CONTENT[100:200])  # still downloading
    other = tmp_path / f"run-{host_name()}-999999999-1.1" / "v2"  # another version of the file
    other.mkdir(parents=True)
    (other / range_name(200, 300, 2)).write_bytes(b"\0" * 100)
    data, copied, downloads = fill(PeerCopies(tmp_path, tmp_path / "mine"), 0, 300)
    assert data == CONTENT[:300] and copied == 100 and downloads == [(100, 300)]


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root (CI runs as root)")
def test_another_user_s_folder_is_never_read(tmp_path):
    folder = peer_folder(tmp_path, 0)
    hold(folder, 0, 100)
    os.chown(folder.parent, 12345, 12345)
    data, copied, downloads = fill(PeerCopies(tmp_path, tmp_path / "mine"), 0, 100)
    assert data == CONTENT[:100] and copied == 0 and downloads == [(0, 100)]


def test_a_peer_file_released_after_the_listing_is_downloaded_instead(tmp_path):
    gone = hold(peer_folder(tmp_path, 0), 0, 100)
    peers = PeerCopies(tmp_path, tmp_path / "mine")
    assert fill(peers, 0, 50)[2] == []  # listed (and copied)
    gone.unlink()  # the peer released it; the listing is still fresh
    data, copied, downloads = fill(peers, 50, 100)
    assert data == CONTENT[50:100] and copied == 0 and downloads == [(50, 100)]
    assert fill(peers, 0, 100)[2] == [(0, 100)]  # listed again: nothing there


def test_a_mixture_s_caches_in_one_process_have_a_folder_each(tmp_path):
    def download(rel, start, end, out):
        out.write(b"a" * (end - start) if rel == "a" else b"b" * (end - start))

    first = PrefetchCache(tmp_path, 1000, download, threads=1, shared=lambda rel: NAME)
    second = PrefetchCache(tmp_path, 1000, download, threads=1, shared=lambda rel: "other")
    first.admit(0, [Piece("a", 0, 10)])
    second.admit(0, [Piece("b", 0, 10)])
    assert first.dir != second.dir and first.dir.parent == second.dir.parent
    a, b = first.locate("a", 0), second.locate("b", 0)
    first.close()
    assert not first.dir.exists() and Path(b.path).read_bytes() == b"b" * 10  # the other cache's files stay
    assert not os.path.exists(a.path)
    second.close()


def test_a_range_a_peer_file_holds_whole_is_a_hard_link_to_it(tmp_path):
    """A cache cuts an admitted range at the bounds of the peers' files, and each piece one file holds whole
    becomes a hard link to it (the same inode: no byte copied), read from its offset in that file; the bytes stay
    when the peer deletes its file. A piece that must come whole (`atomic`) across two peers' files is copied."""
    copied = []

    def download(rel, start, end, out):
        assert rel == "g", f"downloaded bytes {start}-{end} of {rel}, which peers hold"
        out.write(bytes(end - start))

    mine = PrefetchCache(tmp_path, 4096, download, threads=1, shared=lambda rel: NAME if rel == "f" else None,
                         on_copied=copied.append)
    mine.admit("start", [Piece("g", 0, 10)])  # starts the cache (it clears gone processes' folders first)
    mine.settle()
    first, second = hold(peer_folder(tmp_path, 0), 0, 400, 1), hold(peer_folder(tmp_path, 1), 400, 1000, 2)
    third, fourth = hold(peer_folder(tmp_path, 2), 1000, 1500, 3), hold(peer_folder(tmp_path, 3), 1500, 2000, 4)

    def same_file(pos: int, peer: Path, offset: int) -> bool:
        got = mine.locate("f", pos)
        return os.stat(got.path).st_ino == os.stat(peer).st_ino and got.offset == offset

    mine.admit("a", [Piece("f", 100, 900)])  # cut at 400
    mine.admit("b", [Piece("f", 950, 1100)])  # cut at 1000
    mine.admit("c", [Piece("f", 1450, 1550)], atomic=[Piece("f", 1450, 1550)])
    mine.settle()
    assert same_file(100, first, 100) and same_file(399, first, 100) and same_file(400, second, 0)
    assert same_file(950, second, 550) and same_file(1000, third, 0)
    whole = mine.locate("f", 1450)
    assert whole.offset == 0 and os.stat(whole.path).st_ino not in {os.stat(p).st_ino for p in (third, fourth)}
    first.unlink()  # the peer released it: the link keeps its bytes
    for pos, end in ((100, 400), (400, 900), (950, 1000), (1000, 1100), (1450, 1550)):
        got = mine.locate("f", pos)
        with open(got.path, "rb") as f:
            f.seek(got.offset)
            assert f.read(end - pos) == CONTENT[pos:end]
    assert sum(copied) == 800 + 150 + 100
    mine.close()


def test_where_hard_links_fail_the_ranges_are_copied(tmp_path, monkeypatch):
    """A filesystem without hard links (FAT, some network filesystems; mounting one needs more than a test has, so
    `os.link` fails here as it would there): the bytes are copied, and no link is tried again."""
    tries = []

    def no_links(src, dst):
        tries.append(dst)
        raise PermissionError(1, "Operation not permitted", str(dst))

    monkeypatch.setattr(peer_copies.os, "link", no_links)

    def download(rel, start, end, out):
        assert rel == "g", f"downloaded bytes {start}-{end} of {rel}, which a peer holds"
        out.write(bytes(end - start))

    mine = PrefetchCache(tmp_path, 4096, download, threads=1, shared=lambda rel: NAME if rel == "f" else None)
    mine.admit("start", [Piece("g", 0, 10)])  # starts the cache (it clears gone processes' folders first)
    mine.settle()
    peer = hold(peer_folder(tmp_path, 0), 0, 1000)
    mine.admit("a", [Piece("f", 100, 300)])
    mine.admit("b", [Piece("f", 500, 700)])
    mine.settle()
    for pos in (100, 500):
        got = mine.locate("f", pos)
        assert got.offset == 0 and os.stat(got.path).st_ino != os.stat(peer).st_ino
        with open(got.path, "rb") as f:
            assert f.read() == CONTENT[pos:pos + 200]
    assert len(tries) == 1
    mine.close()


def test_on_host_says_whether_admitting_would_download_anything(tmp_path, monkeypatch):
    """Bytes downloaded here or held whole by another cache of this host are on the host; a range still
    downloading here, a byte no cache holds, a file not shared, or a cache that has admitted nothing yet (it knows
    no peers), are not."""
    monkeypatch.setattr(peer_copies, "LIST_TTL_S", 0.0)  # every look lists the peers again
    gate = threading.Event()

    def download(rel, start, end, out):
        if start >= 1000:
            gate.wait(timeout=60)
        out.write(CONTENT[start % 2048:end % 2048 or 2048])

    mine = PrefetchCache(tmp_path, 4096, download, threads=1, shared=lambda rel: NAME if rel == "f" else None)
    assert not mine.on_host([Piece("f", 0, 10)])  # nothing admitted: no peers known
    mine.admit(0, [Piece("f", 0, 100), Piece("g", 0, 100)])
    mine.settle()
    hold(peer_folder(tmp_path, 0), 500, 800)  # after this cache started (it clears gone processes' folders)
    assert mine.on_host([Piece("f", 0, 100), Piece("g", 10, 50)])  # downloaded here
    assert mine.on_host([Piece("f", 50, 100), Piece("f", 500, 800)])  # here, and the peer's whole range
    assert mine.on_host([Piece("f", 600, 700)])
    assert not mine.on_host([Piece("f", 0, 101)])  # byte 100: nobody has it
    assert not mine.on_host([Piece("f", 450, 600)])  # 450-500: nobody
    assert not mine.on_host([Piece("g", 100, 200)])  # a file not shared: peers are never asked
    mine.admit(1, [Piece("f", 1000, 1100)])
    assert not mine.on_host([Piece("f", 1000, 1100)])  # queued or downloading here
    gate.set()
    mine.settle()
    assert mine.on_host([Piece("f", 1000, 1100)])
    mine.close()


def _hold_episodes(source, episodes, ready, stop) -> None:
    for key, one in enumerate(episodes):
        source.admit(key, [one])
    source.settle()
    ready.set()
    stop.wait(timeout=120)


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_second_process_copies_the_episodes_a_first_one_holds(s3, long_video, tmp_path):  # noqa: F811
    source = s3_source(s3, upload(s3, long_video), cache_dir=str(tmp_path))
    size = source.list_files("videos")[REL]
    episodes = [span(size, 4.0, 5.0), span(size, 6.0, 7.0)]
    planned = source.prepare(episodes)
    kept = source.stats()["cache_bytes_peak"]  # what indexing read, but the checked moov: the child copies it
    source.reset_stats()
    fork = multiprocessing.get_context("fork")
    ready, stop = fork.Event(), fork.Event()
    first = fork.Process(target=_hold_episodes, args=(source, episodes, ready, stop))
    first.start()
    try:
        assert ready.wait(timeout=120)
        before = source.stats()
        assert kept > 0 and before["bytes_fetched"] == planned - kept and before["bytes_from_peers"] == kept
        mine = source._proc.cache.dir
        held = {p for p in mine.rglob("*") if p.is_file()}  # the index bytes (the first process links those)
        source.admit("again", [episodes[1]])  # this process: the second episode only
        timestamps = [6.0 + k / 30 for k in range(30)]
        from torchcodec.decoders import VideoDecoder

        got = CpuDecoder().frames_in_run(source, REL, timestamps)
        want = VideoDecoder(str(long_video / REL), seek_mode="approximate").get_frames_in_range(180, 210)
        assert (got.data == want.data).all()
        after = source.stats()
        assert after["bytes_fetched"] == planned - kept, "the second process fetched bytes the first one held"
        assert 0 < after["bytes_from_peers"] < planned and after["ranges_from_peers"] > 0
        added = [p for p in mine.rglob("*") if p.is_file() and p not in held]
        assert added and all(p.stat().st_nlink >= 2 for p in added), "a range was copied, not linked"
        source.release("again")
    finally:
        stop.set()
        first.join(timeout=60)
    assert first.exitcode == 0
