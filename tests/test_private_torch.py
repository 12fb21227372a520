"""Each private torch API dl relies on has a tested fallback, and a fallback that changes behaviour or speed
says so once (a warning naming the API and the torch version), instead of changing it silently."""

import re
import warnings

import pytest
import torch

import dl
from dl.contracts.errors import ResumeError
from dl.dataloader import private_torch
from dl.dataloader.frame_buffers import SharedFrameBuffers, in_pooled_buffer
from dl.testing.synthetic import camera_key, read_frame_code


@pytest.fixture(autouse=True)
def _fresh_announcements(monkeypatch):
    monkeypatch.setattr(private_torch, "_announced", set())


def _frames_ok(batch) -> bool:
    return all(read_frame_code(frame) == (index, 0)
               for frame, index in zip(batch[camera_key(0)], batch["index"].tolist(), strict=True))


def test_without_use_counts_batches_take_fresh_memory_and_say_so_once(small_dataset, monkeypatch):
    monkeypatch.delattr(torch._C, "_storage_Use_Count")
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    version = re.escape(torch.__version__)
    with pytest.warns(RuntimeWarning, match=rf"torch {version} has no torch\._C\._storage_Use_Count: .*fresh memory"):
        loader = dl.make_dataloader(dataset, batch_size=4, num_workers=1)
    assert "frame_buffers" not in loader.facts()
    batches = list(loader)
    assert all(_frames_ok(b) for b in batches) and not any(in_pooled_buffer(b[camera_key(0)]) for b in batches)
    assert sum(len(b["index"]) for b in batches) == len(dataset)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process
        dl.make_dataloader(dataset, batch_size=4, num_workers=1)


def test_without_new_shared_storages_move_to_shared_memory_and_say_so(monkeypatch):
    owner = next(c for c in torch.UntypedStorage.__mro__ if "_new_shared" in vars(c))
    monkeypatch.delattr(owner, "_new_shared")
    with pytest.warns(RuntimeWarning, match=r"has no torch\.UntypedStorage\._new_shared: .*share_memory_"):
        storage = SharedFrameBuffers(keep=2).take(64)
    assert storage.is_shared() and storage.nbytes() >= 64


def test_with_use_counts_and_new_shared_nothing_is_said(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = dl.make_dataloader(dataset, batch_size=4, num_workers=1)
        assert all(_frames_ok(b) for b in loader)
    assert "frame_buffers" in loader.facts()


def test_without_the_iterator_a_persistent_resume_is_refused(small_dataset, persistent_loaders, monkeypatch):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    loader = dl.make_dataloader(dataset, batch_size=4, num_workers=1, persistent_workers=True)
    persistent_loaders.append(loader)
    next(iter(loader))
    state = loader.state_dict()
    monkeypatch.setattr(private_torch, "drop_iterator", lambda dataloader: False)
    monkeypatch.setattr("dl.dataloader.dataloaders.drop_iterator", private_torch.drop_iterator)
    with pytest.raises(ResumeError, match=rf"torch {re.escape(torch.__version__)}.s DataLoader has no _iterator .* "
                                          r"persistent_workers=False"):
        loader.load_state_dict(state)
    fresh = dl.make_dataloader(dataset, batch_size=4, num_workers=1)
    fresh.load_state_dict(state)  # without persistent workers nothing needs dropping
    assert sum(len(b["index"]) for b in fresh) == len(dataset) - 4


def test_drop_iterator_drops_torchs_iterator(small_dataset, persistent_loaders):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    loader = dl.make_dataloader(dataset, batch_size=4, num_workers=1, persistent_workers=True)
    persistent_loaders.append(loader)
    next(iter(loader))
    assert loader._iterator is not None
    iterator = loader._iterator
    assert private_torch.drop_iterator(loader) and loader._iterator is None
    iterator._shutdown_workers()
