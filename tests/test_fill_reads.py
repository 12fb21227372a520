"""A remote video's view ends a decoder's buffer fill at bytes not downloaded yet (`CachedView`'s `fills`):
torchcodec decodes a chunk of open50's real H.264 video whose following bytes are not downloaded without
waiting for them (it waits for them without `fills`), with the frames a local decode gives, and still gets every
byte it needs beyond the chunk when it decodes further; dl's torchcodec opener (`open_video`) turns `fills` on for a
remote source's view.

The cache is a real `PrefetchCache` over the file's bytes. The chunk's bytes and the file's header are
downloaded; the rest of the file is admitted but stays queued, as its one download thread is held by another
file's download until the test ends, so a reader that needs those bytes takes their download over in its own
thread: each such download is recorded."""

import threading

import numpy as np
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from dl.kits.mp4_index import merge_ranges, read_index
from dl.kits.remote.file_cache import Piece, PrefetchCache
from dl.kits.remote.views import CachedView
from dl.kits.video.torchcodec_video import open_video

REL, HELD = "v.mp4", "held.mp4"


class Through:
    """A view's `Reads` over a real cache (no remote reads expected: the whole file is admitted)."""

    def __init__(self, cache: PrefetchCache):
        self.cache = cache

    def cached(self, rel, pos, wait=True):
        return self.cache.locate(rel, pos, wait)

    def remote_read(self, rel, start, end):
        raise AssertionError(f"a remote read of bytes {start}-{end}: every byte is admitted")


@pytest.fixture
def chunk_cached(open50, tmp_path):
    """(local file, its index, the chunk's first and end frame, a `Through` whose cache holds the file's header and
    the chunk's bytes, the rest of the file queued, the downloads of it readers took over)."""
    video = sorted((open50 / "videos").rglob("*.mp4"))[0]
    data = video.read_bytes()
    index = read_index(lambda a, b: data[a:b], len(data), video.name)
    assert index.reorder_depth == 0  # decode order is display order: frames first..end-1 lie in their bytes
    keys = np.flatnonzero(index.keyframes)
    first, end = int(keys[1]), int(keys[2])
    release, taken_over = threading.Event(), []

    def download(rel, a, b, out):
        if rel == HELD:
            release.wait(timeout=120)
            return out.write(b"x")
        if threading.current_thread() is threading.main_thread():
            taken_over.append((a, b))
        out.write(data[a:b])

    cache = PrefetchCache(tmp_path, len(data) + 1, download, threads=1)
    cache.admit("chunk", [Piece(REL, a, b) for a, b in
                          merge_ranges([*index.header, (int(index.offsets[first]), int(index.offsets[end]))])])
    cache.settle()
    cache.admit(HELD, [Piece(HELD, 0, 1)])  # taken first (queued first at depth 0): the thread waits in it
    cache.admit("rest", [Piece(REL, int(index.offsets[end]), len(data))])
    yield video, index, first, end, Through(cache), taken_over
    release.set()
    cache.close()


def decode(source, frames: list[int]) -> torch.Tensor:
    return VideoDecoder(source, seek_mode="approximate").get_frames_at(frames).data


def test_a_fill_ends_at_bytes_not_downloaded_and_the_chunk_decodes_as_locally(chunk_cached):
    video, index, first, end, through, taken_over = chunk_cached
    frames = list(range(first, end))
    view = CachedView(through, REL, index.size, 64 << 10, fills=True)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    assert taken_over == []  # no read waited for bytes past the chunk


def test_without_fills_the_decoder_waits_for_its_read_ahead(chunk_cached):
    video, index, first, end, through, taken_over = chunk_cached
    frames = list(range(first, end))
    view = CachedView(through, REL, index.size, 64 << 10)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    assert taken_over and taken_over[0][0] == index.offsets[end]  # the bytes it reads ahead, downloaded for it


def test_bytes_a_decoder_needs_past_the_chunk_are_still_read(chunk_cached):
    video, index, first, end, through, taken_over = chunk_cached
    frames = list(range(first, end + 3))
    view = CachedView(through, REL, index.size, 64 << 10, fills=True)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    assert taken_over and taken_over[0][0] == index.offsets[end]


def test_dl_opens_a_remote_video_for_torchcodec_with_fills(chunk_cached):
    video, index, first, end, through, taken_over = chunk_cached

    class Remote:  # what `open_video` asks of a source: the decoder's input, and a URL for its errors
        url = "s3://bucket/dataset"

        def video_input(self, rel):
            return CachedView(through, rel, index.size, 64 << 10)

    frames = list(range(first, end))
    decoder = open_video(Remote(), REL, seek_mode="approximate")
    assert torch.equal(decoder.get_frames_at(frames).data, decode(str(video), frames))
    assert taken_over == []
