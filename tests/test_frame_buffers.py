"""dl.dataloader.frame_buffers: workers' shared-memory frame buffers, reused only once the iterating process holds no
reference to them: a held batch is never overwritten, dropped batches' buffers do come back, and a tensor's
own bytes are never taken for a trailer."""

import pytest
import torch

import dl
from dl.dataloader.frame_buffers import (
    TRAILER,
    FrameBufferReturns,
    LocalFrameBuffers,
    SharedFrameBuffers,
    in_pooled_buffer,
)
from dl.dataloader.frames import KEEP_BATCHES
from dl.testing.synthetic import camera_key

CAM0, CAM1 = camera_key(0), camera_key(1)
FRAMES = 2 * 3 * 4 * 5  # bytes of a [2, 3, 4, 5] uint8 frame stack


def frames_in(storage: torch.UntypedStorage, fill: int) -> torch.Tensor:
    frames = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (2, 3, 4, 5))
    return frames.fill_(fill)


def test_a_buffer_comes_back_only_when_nothing_holds_it():
    buffers, returns = SharedFrameBuffers(keep=2), FrameBufferReturns([CAM0])
    held = returns({CAM0: frames_in(buffers.take(FRAMES), 7)})[CAM0]
    assert in_pooled_buffer(held)
    second = frames_in(buffers.take(FRAMES), 9)  # the first is still held: a second pooled buffer
    returns({CAM0: second})
    assert torch.equal(held, torch.full_like(held, 7))
    unpooled = buffers.take(FRAMES)  # both held, keep=2: a fresh segment of just the frames
    assert unpooled.nbytes() == FRAMES and not in_pooled_buffer(frames_in(unpooled, 0))
    del second
    returns.give_back()
    reused = frames_in(buffers.take(FRAMES), 0)
    assert in_pooled_buffer(reused) and len(buffers._pool[FRAMES]) == 2 and torch.equal(held, torch.full_like(held, 7))
    reused.fill_(1)
    assert torch.equal(held, torch.full_like(held, 7))


def test_the_frames_own_bytes_are_never_a_trailer():
    buffers = SharedFrameBuffers(keep=1)
    whole = torch.empty(0, dtype=torch.uint8).set_(buffers.take(FRAMES), 0, (FRAMES + TRAILER,))
    lookalike = whole[FRAMES:].clone()  # a trailer's tag and state, as a tensor's own data
    assert lookalike.numel() == TRAILER and not in_pooled_buffer(lookalike)
    padded = torch.cat([torch.zeros(FRAMES, dtype=torch.uint8), lookalike])
    assert not in_pooled_buffer(padded)  # a tensor covering all of its storage has no trailer


def by_index(batches):
    return {int(i): (b[CAM0][j], b[CAM1][j]) for b in batches for j, i in enumerate(b["index"])}


@pytest.mark.parametrize("image_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("loader", ["map", "pool"])
def test_held_batches_keep_their_values_and_dropped_ones_free_their_buffers(small_dataset, loader, image_dtype):
    options = {"episode_pool_size": 2} if loader == "pool" else {}

    def dataloader(workers):
        dataset = dl.make_dataset(str(small_dataset), loader=loader, seed=5, image_dtype=image_dtype,
                                  loader_options=options)
        return dl.make_dataloader(dataset, batch_size=4, num_workers=workers)

    reference = by_index(dataloader(0))
    ours = dataloader(2)
    assert ours.facts()["frame_buffers"].startswith("reused")
    held = list(ours)  # every batch held: the workers must not write into any of them again
    full = [b for b in held if len(b["index"]) == 4]  # (a short last batch has buffers of another size)
    assert sum(in_pooled_buffer(b[CAM0]) for b in full) <= KEEP_BATCHES * 2
    got = by_index(held)
    assert sorted(got) == sorted(reference)
    for index, frames in got.items():
        assert all(torch.equal(a, b) for a, b in zip(frames, reference[index], strict=True)), index
    del held, got
    pooled = batches = 0
    for batch in ours:  # each batch dropped after use: its buffers come back
        assert all(torch.equal(a, b) for i, j in enumerate(batch["index"])
                   for a, b in zip((batch[CAM0][i], batch[CAM1][i]), reference[int(j)], strict=True))
        if len(batch["index"]) == 4:
            pooled, batches = pooled + in_pooled_buffer(batch[CAM0]), batches + 1
    assert pooled > KEEP_BATCHES * 2, f"{pooled} of {batches} full batches in pooled buffers: none came back"


def test_a_local_buffer_is_reused_only_when_no_tensor_holds_it():
    buffers = LocalFrameBuffers(keep=1)
    held = frames_in(buffers.take(FRAMES), 7)
    other = buffers.take(FRAMES)  # the pooled one is held: a fresh storage, not kept
    assert other.data_ptr() != held.data_ptr() and len(buffers._pool[FRAMES]) == 1
    frames_in(other, 9)
    assert torch.equal(held, torch.full_like(held, 7))
    pointer = held.data_ptr()
    del held
    assert buffers.take(FRAMES).data_ptr() == pointer


@pytest.mark.parametrize("image_dtype", ["uint8", "float32"])
def test_without_workers_held_batches_keep_their_values(small_dataset, image_dtype):
    def dataloader(**options):
        dataset = dl.make_dataset(str(small_dataset), loader="pool", seed=5, image_dtype=image_dtype,
                                  loader_options={"episode_pool_size": 2})
        return dl.make_dataloader(dataset, batch_size=4, num_workers=0, **options)

    reference = by_index(dataloader(reuse_frame_buffers=False))
    ours = dataloader()
    assert ours.facts()["frame_buffers"] == "reused (batches stack into memory no batch in use holds)"
    held = list(ours)  # every batch held: none may be stacked over
    got = by_index(held)
    assert sorted(got) == sorted(reference)
    for index, frames in got.items():
        assert all(torch.equal(a, b) for a, b in zip(frames, reference[index], strict=True)), index
    for batch in ours:  # each dropped after use: stacked into pooled buffers again, values unchanged
        assert all(torch.equal(a, b) for i, j in enumerate(batch["index"])
                   for a, b in zip((batch[CAM0][i], batch[CAM1][i]), reference[int(j)], strict=True))
    assert 0 < sum(map(len, ours.collate_fn.local_buffers._pool.values())) <= KEEP_BATCHES * 2 * 2


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_no_reuse_with_pin_memory_or_when_asked(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    assert "frame_buffers" not in dl.make_dataloader(dataset, batch_size=4, num_workers=0,
                                                     reuse_frame_buffers=False).facts()
    off = dl.make_dataloader(dataset, batch_size=4, num_workers=1, reuse_frame_buffers=False)
    assert "frame_buffers" not in off.facts() and not any(in_pooled_buffer(b[CAM0]) for b in off)
    pinned = dl.make_dataloader(dataset, batch_size=4, num_workers=1, pin_memory=True)
    assert "frame_buffers" not in pinned.facts() and not in_pooled_buffer(next(iter(pinned))[CAM0])
