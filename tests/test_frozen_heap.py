"""DataLoader workers are forked with the parent's heap frozen (dl.dataloader.frozen_heap): a worker's garbage
collector never walks what it inherited, and the parent's own collections still free its objects."""

import gc
import weakref

import torch.utils.data

from dl.dataloader.dataloaders import DlDataLoader


class FreezeCounts(torch.utils.data.IterableDataset):
    """Yields, in each worker, the number of objects its collector keeps frozen."""

    def __iter__(self):
        yield gc.get_freeze_count()


class Cycle:
    """Garbage only a collection frees (it refers to itself)."""

    def __init__(self):
        self.me = self


def test_workers_inherit_the_parent_heap_frozen_and_the_parent_does_not():
    inherited = [Cycle() for _ in range(1000)]  # tracked objects the workers inherit
    loader = DlDataLoader(FreezeCounts(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    counts = [int(n) for n in loader]
    assert len(counts) == 2 and min(counts) > len(inherited)
    assert gc.get_freeze_count() == 0


def test_the_parent_still_collects_garbage_made_before_the_fork():
    garbage = Cycle()
    alive = weakref.ref(garbage)
    loader = DlDataLoader(FreezeCounts(), batch_size=None, num_workers=1, multiprocessing_context="fork")
    assert len(list(loader)) == 1
    del garbage
    gc.collect()
    assert alive() is None
