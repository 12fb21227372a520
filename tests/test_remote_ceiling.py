"""The decode ceiling through a remote source (moto's S3 server on loopback) decodes local copies of the first
episodes that fit its byte limit: downloaded once before the trials, never streamed per frame, and dropped after
(they must not warm the run's window)."""

from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.bench.ceiling import local_copies
from dl.bench.ceiling_workers import decode_ceiling
from dl.format.metadata import DatasetMeta
from dl.kits.remote.host_cache import BLOCK_BYTES
from dl.plugins.cpu_decoder import CpuDecoder


def _remote_meta(s3, dataset_factory):  # noqa: F811
    root = dataset_factory(episodes=4, episodes_per_file=2, frames_per_episode=(40, 50), cameras=1)
    source = s3_source(s3, upload(s3, root))
    meta = DatasetMeta.load(source)
    episodes = list(meta.select(None))
    planned = source.prepare([span for ep in episodes for span in meta.file_spans(ep)])
    return meta, source, episodes, planned


def test_the_ceiling_downloads_its_episodes_once_and_drops_them(s3, dataset_factory):  # noqa: F811
    meta, source, episodes, planned = _remote_meta(s3, dataset_factory)
    first = episodes[:1]
    source.reset_stats()
    source.admit("probe", meta.file_spans(first[0]), wait=True)
    one_episode = source.figures()["bytes_fetched"]
    source.release("probe", drop=True)
    source.reset_stats()
    ceiling = decode_ceiling(meta, CpuDecoder(), episodes, seconds=0.4, num_workers=1)
    assert ceiling is not None and ceiling["random_frames_per_s"] > 0 and ceiling["sequential_frames_per_s"] > 0
    stats = source.figures()
    assert stats["remote_reads"] == 0, "the trials streamed frames from the server"
    assert planned <= stats["bytes_fetched"] == stats["bytes_prefetched"]  # every episode (all fit the limit)
    assert stats["bytes_fetched"] <= planned + 2 * BLOCK_BYTES * len(meta.files)  # each block once
    source.reset_stats()
    source.admit("again", meta.file_spans(first[0]), wait=True)
    assert source.figures()["bytes_fetched"] == one_episode, "the ceiling's copies outlived it"
    source.release("again")


def test_a_remote_ceiling_takes_the_first_episodes_that_fit(s3, dataset_factory):  # noqa: F811
    meta, source, episodes, planned = _remote_meta(s3, dataset_factory)
    with local_copies(meta, episodes, limit=1) as held:
        assert [ep.index for ep in held] == [episodes[0].index]  # at least one, however small the limit
    with local_copies(meta, episodes, limit=1 << 30) as held:
        assert [ep.index for ep in held] == [ep.index for ep in episodes]
