"""The decode ceiling through a remote source (moto's S3 server on loopback) decodes local copies of the first
episodes that fit its byte limit: downloaded once before the trials, never streamed per frame, and discarded
after (they must not warm the run's window); a DataLoader worker forked after `settle()` while a download
thread holds the cache's lock reads the settled ranges instead of waiting forever for that lock."""

import multiprocessing
import threading

from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.bench.ceiling import local_copies
from dl.bench.ceiling_workers import decode_ceiling
from dl.format.metadata import DatasetMeta
from dl.plugins.cpu_decoder import CpuDecoder


def _remote_meta(s3, dataset_factory):  # noqa: F811
    root = dataset_factory(episodes=4, episodes_per_file=2, frames_per_episode=(40, 50), cameras=1)
    source = s3_source(s3, upload(s3, root))
    meta = DatasetMeta.load(source)
    episodes = list(meta.select(None))
    planned = source.prepare([span for ep in episodes for span in meta.file_spans(ep)])
    return meta, source, episodes, planned


def test_the_ceiling_downloads_its_episodes_once_and_discards_them(s3, dataset_factory):  # noqa: F811
    meta, source, episodes, planned = _remote_meta(s3, dataset_factory)
    kept = source.stats()["cache_bytes_peak"]  # what indexing read (but the checked moovs), kept by this process
    first = episodes[:1]
    source.reset_stats()
    source.admit("probe", meta.file_spans(first[0]))
    source.settle()
    one_episode = source.stats()["bytes_fetched"]
    source.discard("probe")
    source.reset_stats()
    ceiling = decode_ceiling(meta, CpuDecoder(), episodes, seconds=0.4, num_workers=1)
    assert ceiling is not None and ceiling["random_frames_per_s"] > 0 and ceiling["sequential_frames_per_s"] > 0
    stats = source.stats()
    assert stats["remote_reads"] == 0, "the trials streamed frames from the server"
    assert stats["bytes_fetched"] == planned - kept  # every episode's bytes (all fit the limit), each byte once
    source.reset_stats()
    source.admit("again", meta.file_spans(first[0]))
    source.settle()
    assert source.stats()["bytes_fetched"] == one_episode, "the ceiling's copies outlived it"
    source.release("again")


def test_a_remote_ceiling_takes_the_first_episodes_that_fit(s3, dataset_factory):  # noqa: F811
    meta, source, episodes, planned = _remote_meta(s3, dataset_factory)
    with local_copies(meta, episodes, limit=1) as held:
        assert [ep.index for ep in held] == [episodes[0].index]  # at least one, however small the limit
    with local_copies(meta, episodes, limit=1 << 30) as held:
        assert [ep.index for ep in held] == [ep.index for ep in episodes]


def _read_first_range(source, rel: str, want: bytes, done) -> None:
    done.put(source.read_bytes(rel, 0, len(want)) == want)


def test_a_worker_forked_while_a_download_thread_holds_the_cache_lock_reads_the_settled_ranges(
        s3, dataset_factory):  # noqa: F811
    meta, source, episodes, planned = _remote_meta(s3, dataset_factory)
    spans = meta.file_spans(episodes[0])
    rel = spans[-1].path  # the episode's video
    source.admit("held", spans)
    source.settle()
    want = source.read_bytes(rel, 0, 4096)
    lock = source._state().cache._cond  # what a download thread holds while it files a finished range
    fork = multiprocessing.get_context("fork")
    done = fork.Queue()
    held, forked = threading.Event(), threading.Event()

    def hold():
        with lock:
            held.set()
            forked.wait(timeout=60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(timeout=60)
    child = fork.Process(target=_read_first_range, args=(source, rel, want, done))
    child.start()
    forked.set()
    holder.join()
    child.join(timeout=60)
    if child.exitcode is None:
        child.kill()
        child.join()
    assert child.exitcode == 0, "the forked worker hung on the lock its parent's download thread held"
    assert done.get(timeout=10)
    source.release("held")
