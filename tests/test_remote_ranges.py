"""Remote sources read byte ranges, against moto's S3 server on loopback: an episode of a long video fetches the
blocks of its frames' ranges and of the index, not the file, and decodes the same frames as the local file; the
host's cache serves later epochs and this host's other processes; dropped blocks are fetched again; the indexes
are read once and travel in `state()`; a file that changed after it was indexed (its length, or its index in place),
or a range that comes back short, fails naming the file; a data file's episode reads its row groups only; progress
without a terminal."""

import io
import shutil
import subprocess

import pytest
from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)
from rich.console import Console

import dl
from dl.contracts.source import FileSpan
from dl.format.metadata import DatasetMeta
from dl.host.assembly import build_loader
from dl.kits.remote.host_cache import BLOCK_BYTES
from dl.kits.remote.prefetch import block_runs
from dl.kits.remote.retry import RemoteReadError
from dl.kits.video_indexes import indexes_of
from dl.plugins.cpu_decoder import CpuDecoder

REL = "videos/cam/file-000.mp4"


@pytest.fixture(scope="module")
def long_video(tmp_path_factory):
    """A folder holding a 10 s 640x480 AV1 (GOP 2) test-pattern video at REL, ~2 MB, moov at the end."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is needed to write the test video (apt-get install ffmpeg)")
    root = tmp_path_factory.mktemp("long")
    (root / REL).parent.mkdir(parents=True)
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=640x480:rate=30", "-frames:v", "300", "-pix_fmt", "yuv420p", "-c:v", "libsvtav1",
                    "-preset", "12", "-g", "2", str(root / REL)], check=True)
    return root


def span(size: int, start: float, stop: float) -> FileSpan:
    return FileSpan(REL, size=size, from_timestamp=start, to_timestamp=stop)


def blocks_of(source, spans) -> int:
    """The bytes of the blocks holding what `spans` need (each file's index and their frames)."""
    pieces = source.plans.pieces(spans, source._size, indexes_of(source))[0]
    return sum((run.last - run.first + 1) * BLOCK_BYTES for run in block_runs(pieces, [], BLOCK_BYTES))


def restored(source, host):
    """`source` given what `host` learnt, as `DatasetMeta.to_snapshot` carries it: its state and video indexes."""
    source.restore(host.state())
    indexes_of(source).restore(indexes_of(host).state())
    return source


def decoded_like_the_file(source, long_video) -> bool:
    got = CpuDecoder().frames_in_run(source, REL, [4.0 + k / 30 for k in range(60)])
    from torchcodec.decoders import VideoDecoder

    return bool((got.data == VideoDecoder(str(long_video / REL), seek_mode="approximate")[120:180]).all())


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_an_episode_of_a_long_video_fetches_its_blocks_and_decodes_like_the_file(s3, long_video):  # noqa: F811
    source = s3_source(s3, upload(s3, long_video))
    size = source.list_files("videos")[REL]
    spans = [span(size, 4.0, 6.0)]
    planned = source.prepare(spans)
    assert planned < size / 2  # an index and 2 s of a 10 s video
    source.reset_stats()
    source.admit(7, spans)
    assert decoded_like_the_file(source, long_video)
    stats = source.figures()
    assert stats["remote_reads"] == 0 and stats["cache_hits"] > 0
    assert planned <= stats["bytes_prefetched"] == stats["bytes_fetched"] <= blocks_of(source, spans)
    source.release(7)


def test_a_decoder_opened_before_admission_reads_the_cached_blocks(s3, long_video):  # noqa: F811
    # the dataset's format check opens a file's decoder before any episode is admitted, and this process's decoder
    # cache keeps it for the decodes that follow (the host's own reads: `num_workers=0`)
    source = s3_source(s3, upload(s3, long_video))
    size = source.list_files("videos")[REL]
    spans = [span(size, 4.0, 6.0)]
    source.prepare(spans)
    decoder = CpuDecoder()
    assert decoder.probe(source, REL)["num_frames"] == 300
    source.reset_stats()
    source.admit(7, spans, wait=True)
    fetched = source.figures()["bytes_fetched"]
    got = decoder.frames_in_run(source, REL, [4.0 + k / 30 for k in range(60)])
    from torchcodec.decoders import VideoDecoder

    assert (got.data == VideoDecoder(str(long_video / REL), seek_mode="approximate")[120:180]).all()
    assert source.figures()["bytes_fetched"] == fetched and source.figures()["cache_hits"] > 0
    source.release(7)


def test_an_episode_is_fetched_once_across_epochs_and_processes_of_the_host(s3, long_video):  # noqa: F811
    url = upload(s3, long_video)
    host = s3_source(s3, url)
    size = host.list_files("videos")[REL]
    spans = [span(size, 4.0, 5.0), span(size, 6.0, 7.0)]
    host.prepare(spans)
    host.reset_stats()
    for epoch in range(2):  # each episode admitted, read and released, then again in the next epoch
        for key, one in enumerate(spans):
            host.admit((epoch, key), [one], wait=True)
            host.release((epoch, key))
    fetched = host.figures()["bytes_fetched"]
    assert 0 < fetched <= blocks_of(host, spans)
    worker = restored(s3_source(s3, url), host)  # a DataLoader worker or a rank on this host
    worker.admit(7, spans[:1])
    assert decoded_like_the_file(worker, long_video)
    assert worker.figures()["bytes_fetched"] == 0 and worker.figures()["cache_hits"] > 0


def test_dropped_blocks_are_fetched_again(s3, long_video):  # noqa: F811
    source = s3_source(s3, upload(s3, long_video))
    spans = [span(source.list_files("videos")[REL], 4.0, 5.0)]
    source.prepare(spans)
    source.reset_stats()
    source.admit("ceiling", spans, wait=True)
    once = source.figures()["bytes_fetched"]
    source.release("ceiling", drop=True)
    source.reset_stats()
    source.admit("run", spans, wait=True)  # again, and the index's blocks indexing left in the cache, dropped too
    assert source.figures()["bytes_fetched"] > once > 0


def test_indexes_are_read_once_and_travel_in_the_state(s3, long_video):  # noqa: F811
    url = upload(s3, long_video)
    host = s3_source(s3, url)
    size = host.list_files("videos")[REL]
    spans = [span(size, 0.0, 2.0), span(size, 2.0, 4.0)]
    host.prepare(spans)
    assert host.figures()["requests"] == 1 + 2  # the listing, then the head and the trailing moov
    rank = restored(s3_source(s3, url), host)
    assert rank.prepare(spans) == host.prepare(spans)
    assert rank.figures()["requests"] == 0 and rank.fingerprint(REL) == host.fingerprint(REL)
    with rank.open(REL) as f:  # the listed size travels too: no request for it when a worker opens the file
        assert f.seek(0, io.SEEK_END) == size
    assert rank.figures()["requests"] == 0


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_file_that_changed_after_indexing_fails_naming_it(s3, long_video, tmp_path):  # noqa: F811
    url = upload(s3, long_video)
    source = s3_source(s3, url)
    size = source.list_files("videos")[REL]
    source.prepare([span(size, 4.0, 6.0)])
    changed = tmp_path / "changed.mp4"  # the same length of video, encoded anew: another moov
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=640x480:rate=30", "-frames:v", "300", "-pix_fmt", "yuv420p", "-c:v", "libsvtav1",
                    "-preset", "12", "-g", "4", str(changed)], check=True)
    s3.filesystem().put_file(str(changed), f"{url.removeprefix('s3://')}/{REL}")
    source.admit(0, [span(size, 4.0, 6.0)])
    with pytest.raises(dl.DlError, match=rf"{REL}.*(changed since it was indexed|changed since it was listed)"):
        CpuDecoder().frames_in_run(source, REL, [4.0, 4.0 + 1 / 30])


def test_an_index_changed_in_place_fails_naming_the_file(s3, long_video):  # noqa: F811
    """The same size, one byte of the `moov` changed after indexing (the listing saw the old version): only the check
    of the index bytes against those indexed can tell."""
    url = upload(s3, long_video)
    source = s3_source(s3, url)
    size = source.list_files("videos")[REL]
    source.prepare([span(size, 4.0, 6.0)])
    start, end = indexes_of(source).found[REL].moov
    data = bytearray((long_video / REL).read_bytes())
    data[(start + end) // 2] ^= 0xFF
    s3.filesystem().pipe_file(f"{url.removeprefix('s3://')}/{REL}", bytes(data))
    with pytest.raises(RemoteReadError, match=rf"{REL} changed since it was indexed \(bytes {start}-{end}"):
        source.admit(0, [span(size, 4.0, 6.0)], wait=True)


def test_a_short_range_fails_naming_the_file(s3, long_video):  # noqa: F811
    url = upload(s3, long_video)
    source = s3_source(s3, url)
    size = source.list_files("videos")[REL]
    source.prepare([span(size, 4.0, 6.0)])
    data = (long_video / REL).read_bytes()
    s3.filesystem().pipe_file(f"{url.removeprefix('s3://')}/{REL}", data[: size // 3])  # cut short
    with pytest.raises(dl.DlError, match=rf"{REL}: .*bytes .*: the file changed since it was listed"):
        source.admit(0, [span(size, 4.0, 6.0)], wait=True)


def test_an_episode_reads_only_its_row_groups(s3, dataset_factory):  # noqa: F811
    root = dataset_factory(episodes=6, episodes_per_file=6, frames_per_episode=(300, 400), row_group_size=100,
                           state_dim=64, action_dim=64, cameras=0)
    source = s3_source(s3, upload(s3, root))
    meta = DatasetMeta.load(source)
    ep = meta.episodes[3]
    data_size = meta.files[ep.data_path]
    planned = source.prepare(meta.file_spans(ep))
    assert planned < data_size
    source.reset_stats()
    dataset = dl.make_dataset(str(root), source="local", loader="map", episodes=[3])
    local = [dataset[i]["index"].item() for i in range(len(dataset))]
    remote = build_loader(meta, "map", "cpu", config=dl.LoaderConfig(episodes=[3])).loader
    assert [remote[i]["index"].item() for i in range(len(remote))] == local
    assert source.figures()["remote_reads"] == 0


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_the_map_downloads_a_file_of_many_episodes_in_a_few_ranges(s3, dataset_factory):  # noqa: F811
    """Every selected episode is needed at once, so the episodes of a file are admitted together and their adjacent
    ranges come in a few requests per file, not one per episode (at 100,000 episodes that was minutes)."""
    root = dataset_factory(episodes=24, episodes_per_file=12, frames_per_episode=(20, 30), cameras=1, codec="h264",
                           gop=2, width=320, height=240, texture=44, row_group_size=None)  # episodes > read-ahead
    source = s3_source(s3, upload(s3, root))
    meta = DatasetMeta.load(source)
    remote = build_loader(meta, "map", "cpu", config=dl.LoaderConfig(image_dtype="uint8")).loader
    files = {f for ep in meta.episodes.values() for f in ep.files()}
    assert source.figures()["ranges_prefetched"] <= 4 * len(files) < len(meta.episodes)
    local = dl.make_dataset(str(root), source="local", loader="map", image_dtype="uint8")
    assert [remote[i]["index"].item() for i in range(len(remote))] == [local[i]["index"].item() for i in
                                                                        range(len(local))]


def test_progress_lines_without_a_terminal_take_counts_with_no_total():
    from dl.bench.progress import rich_progress

    out = io.StringIO()
    with rich_progress("run", Console(file=out, force_terminal=False, width=200)) as progress:
        progress("download MB", 1.5, None)
        progress("warm-up", 1, 4)
        progress("warm-up", 4, 4)
        progress("download MB", 3.0, None)
    assert out.getvalue().splitlines() == ["run: download MB 2", "run: warm-up 1/4", "run: warm-up 4/4"]
