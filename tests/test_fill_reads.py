"""A remote video's view ends a decoder's buffer fill at blocks not in the cache yet (`CachedView`'s `fills`):
torchcodec decodes a chunk of open50's real H.264 video whose following bytes are not downloaded without
waiting for them (it waits for them without `fills`), with the frames a local decode gives, and still gets every
byte it needs beyond the chunk when it decodes further; dl's torchcodec opener (`open_video`) turns `fills` on for a
remote source's view.

The view reads through a stand-in source whose cache holds the blocks of the file's header and of the chunk (small
blocks, so that they end close to the chunk); a block a reader waits for is fetched and recorded."""

import numpy as np
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from dl.kits.mp4_index import read_index
from dl.kits.remote import views
from dl.kits.remote.source import RemoteOptions
from dl.kits.remote.views import CachedView
from dl.kits.video.torchcodec_video import open_video

REL, BLOCK = "v.mp4", 4096


class Blocks:
    """A view's `Reads`: blocks of `data` as files under `folder`, those of `held` there from the start."""

    options = RemoteOptions()

    def __init__(self, data: bytes, folder, held: set[int]):
        self.data, self.folder, self.taken_over = data, folder, []
        for block in held:
            self._write(block)

    def _write(self, block: int) -> str:
        path = self.folder / str(block)
        path.write_bytes(self.data[block * BLOCK:(block + 1) * BLOCK])
        return str(path)

    def block_path(self, rel, block, wait=True):
        path = self.folder / str(block)
        if path.exists():
            return str(path)
        if not wait:
            return None
        self.taken_over.append(block * BLOCK)  # a reader waited for it
        return self._write(block)

    def read_bytes(self, rel, start, end):
        raise AssertionError(f"a remote read of bytes {start}-{end}: the view reads blocks")


@pytest.fixture
def chunk_cached(open50, tmp_path, monkeypatch):
    """(local file, its index, the chunk's first and end frame, a `Blocks` holding the file's header's and the
    chunk's blocks)."""
    monkeypatch.setattr(views, "BLOCK_BYTES", BLOCK)
    video = sorted((open50 / "videos").rglob("*.mp4"))[0]
    data = video.read_bytes()
    index = read_index(lambda a, b: data[a:b], len(data), video.name)
    assert index.reorder_depth == 0  # decode order is display order: frames first..end-1 lie in their bytes
    keys = np.flatnonzero(index.keyframes)
    first, end = int(keys[1]), int(keys[2])
    ranges = [*index.header, (int(index.offsets[first]), int(index.offsets[end]))]
    held = {n for a, b in ranges for n in range(a // BLOCK, (b - 1) // BLOCK + 1)}
    return video, index, first, end, Blocks(data, tmp_path, held)


def decode(source, frames: list[int]) -> torch.Tensor:
    return VideoDecoder(source, seek_mode="approximate").get_frames_at(frames).data


def test_a_fill_ends_at_bytes_not_downloaded_and_the_chunk_decodes_as_locally(chunk_cached):
    video, index, first, end, through = chunk_cached
    frames = list(range(first, end))
    view = CachedView(through, REL, index.size, fills=True)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    assert through.taken_over == []  # no read waited for bytes past the chunk


def test_without_fills_the_decoder_waits_for_its_read_ahead(chunk_cached):
    video, index, first, end, through = chunk_cached
    frames = list(range(first, end))
    view = CachedView(through, REL, index.size)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    after = (int(index.offsets[end]) - 1) // BLOCK * BLOCK + BLOCK  # the first block past the chunk's
    assert through.taken_over and through.taken_over[0] == after  # the bytes it reads ahead, fetched for it


def test_bytes_a_decoder_needs_past_the_chunk_are_still_read(chunk_cached):
    video, index, first, end, through = chunk_cached
    frames = list(range(first, end + 3))
    view = CachedView(through, REL, index.size, fills=True)
    assert torch.equal(decode(view, frames), decode(str(video), frames))
    assert through.taken_over and through.taken_over[0] == (int(index.offsets[end]) - 1) // BLOCK * BLOCK + BLOCK


def test_dl_opens_a_remote_video_for_torchcodec_with_fills(chunk_cached):
    video, index, first, end, through = chunk_cached

    class Remote:  # what `open_video` asks of a source: the decoder's input, and a URL for its errors
        url = "s3://bucket/dataset"

        def video_input(self, rel):
            return CachedView(through, rel, index.size)

    frames = list(range(first, end))
    decoder = open_video(Remote(), REL, seek_mode="approximate")
    assert torch.equal(decoder.get_frames_at(frames).data, decode(str(video), frames))
    assert through.taken_over == []
