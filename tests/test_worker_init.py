"""dl's worker_init_fn (dl.dataloader.build.WorkerInit) freezes what a forked DataLoader worker inherits: the
worker's collector never walks the parent's heap, the parent's garbage is finalized once, in the parent, and
the parent's own collector is untouched."""

import gc
import os

import torch.utils.data

from dl.dataloader.build import WorkerInit


class Witness:
    """Garbage only a collection frees (it refers to itself); when finalized it appends its process id to a
    file."""

    def __init__(self, path):
        self.me, self.path = self, path

    def __del__(self):
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")


class CollectInWorker(torch.utils.data.IterableDataset):
    """In each worker, runs a full collection, then yields how many objects the collector keeps frozen."""

    def __iter__(self):
        gc.collect()
        yield gc.get_freeze_count()


def worker_loader(num_workers: int) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(CollectInWorker(), batch_size=None, num_workers=num_workers,
                                       multiprocessing_context="fork", worker_init_fn=WorkerInit())


def test_a_forked_worker_keeps_what_it_inherited_frozen_and_the_parent_does_not():
    inherited = [Witness(os.devnull) for _ in range(1000)]  # tracked objects the workers inherit
    counts = [int(n) for n in worker_loader(num_workers=2)]
    assert len(counts) == 2 and min(counts) > len(inherited)
    assert gc.get_freeze_count() == 0


def test_garbage_inherited_from_the_parent_is_finalized_once_in_the_parent(tmp_path):
    finalized = tmp_path / "finalized"
    gc.disable()  # the garbage below must still exist when the workers fork
    try:
        Witness(finalized)
        assert len(list(worker_loader(num_workers=2))) == 2  # each worker ran gc.collect()
        assert not finalized.exists()
    finally:
        gc.enable()
    gc.collect()
    assert finalized.read_text().split() == [str(os.getpid())]
