"""One index per video file (issue 66): `dl.kits.video_indexes` is the one module that calls the MP4 index parser;
the host parses each file once (a remote source's `prepare`, against moto's S3 server on loopback) and the metadata
snapshot carries the indexes, so a run rebuilt from it gets frame times, plans, the pool's keyframe grid and the
seek-mode check without a request."""

import ast
from pathlib import Path

import numpy as np
from remote_helpers import s3, s3_source, upload  # noqa: F401 (fixtures)

from dl.format.frame_times import load_selection
from dl.format.metadata import DatasetMeta
from dl.kits.video.frame_grid import approximate_places_frames
from dl.kits.video_indexes import VideoIndexes, indexes_of
from dl.plugins.local_source import local_source
from dl.plugins.pool.gop import episode_gop

REPO = Path(__file__).resolve().parents[1]


def test_one_module_calls_the_mp4_index_parser():
    callers = set()
    for folder in ("core", "plugins", "cli"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and "read_index" in {getattr(node.func, "id", None),
                                                                    getattr(node.func, "attr", None)}:
                    callers.add(str(path.relative_to(REPO)))
    assert callers == {"core/kits/video_indexes.py"}


def test_the_indexes_travel_in_their_state(small_dataset):
    source = local_source(str(small_dataset))
    meta = DatasetMeta.load(source)
    videos = sorted(p for p in meta.files if p.endswith(".mp4"))
    held = indexes_of(source)
    for path in videos:
        held.get(path, meta.files[path], lambda a, b, p=path: source.read_bytes(p, a, b), path)
    assert held.get("meta/info.json", meta.files["meta/info.json"],
                    lambda a, b: source.read_bytes("meta/info.json", a, b), "info.json") is None
    again = VideoIndexes()
    again.restore(held.state())
    assert sorted(again.found) == videos and again.unindexed == held.unindexed
    for path in videos:
        one, other = held.found[path], again.found[path]
        for key in ("offsets", "sizes", "pts", "keyframes"):
            np.testing.assert_array_equal(getattr(one, key), getattr(other, key))
            assert getattr(one, key).dtype == getattr(other, key).dtype
        assert (one.timescale, one.header, one.size, one.moov, one.codec) == (
            other.timescale, other.header, other.size, other.moov, other.codec)


def test_a_run_from_the_snapshot_reads_no_index_the_host_parsed(s3, dataset_factory, tmp_path):  # noqa: F811
    from torchcodec.decoders import VideoDecoder

    small_dataset = dataset_factory(episodes=3, frames_per_episode=(24, 24), width=64, height=64, codec="mpeg4",
                                    gop=6)  # MPEG-4 Part 2 without B-frames: a keyframe grid
    url = upload(s3, small_dataset)
    host = s3_source(s3, url)
    meta = DatasetMeta.load(host)
    selected = meta.select(None)
    host.prepare([span for ep in selected for span in meta.file_spans(ep)])  # the host: each file's index, once
    snapshot = meta.write_snapshot(tmp_path / "specs")

    run = s3_source(s3, url)
    again = DatasetMeta.from_snapshot(run, snapshot)
    videos = sorted({ep.videos[key].path for ep in selected for key in meta.video_keys})
    assert sorted(indexes_of(run).found) == videos
    load_selection(again, again.select(None))
    gop = episode_gop(again, again.select(None)[0])
    run.prepare([span for ep in again.select(None) for span in again.file_spans(ep)])
    streams = {path: VideoDecoder(str(small_dataset / path)).metadata for path in videos}
    right = {path: approximate_places_frames(run, path, streams[path]) for path in videos}
    assert run.figures()["requests"] == 0  # frame times, plans, keyframe grid and seek-mode check: no read

    local = local_source(str(small_dataset))
    local_meta = DatasetMeta.load(local)
    load_selection(local_meta, local_meta.select(None))
    assert gop == episode_gop(local_meta, local_meta.select(None)[0]) == 6  # the generator's GOP
    assert right == {path: approximate_places_frames(local, path, streams[path]) for path in videos}
    for path in videos:
        np.testing.assert_array_equal(again.frame_times.times[path], local_meta.frame_times.times[path])
