"""Shared constants, fixtures and helpers of the pool loader tests (test_pool_*.py)."""

import warnings
from collections import Counter

import pytest
import torch
import torch.utils.data
from torch.utils.data import default_collate

import dl
from dl.testing.synthetic import camera_key

FPS = 30
CAM0 = camera_key(0)
# tabular only (no video), 7 episodes of uneven length: fast, and splits are uneven
TABULAR = dict(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3)
# one camera, for resume (frames compared sample by sample) and pool memory figures
VIDEO = dict(episodes=5, frames_per_episode=(10, 30), cameras=1, codec="h264", gop=4, episodes_per_file=3)
# every episode in one file and one row group ("collapsed"): 64 episodes x 80 rows = 5120 rows, more than
# the 4096-row batches dl.format.tabular streams, so an early episode can be read without reading the whole file
COLLAPSED = dict(episodes=64, frames_per_episode=(80, 80), cameras=0, episodes_per_file=64, row_group_size=None)
TABULAR_BYTES_PER_FRAME = 6 * 4 + 6 * 4 + 4 + 4 * 8  # state, action (float32 x 6), timestamp, four int64

# 3 DataLoader workers on a 2-core machine are intended here
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create .* worker processes")




def pool(root, *, seed=0, episodes=None, delta_timestamps=None, image_dtype="uint8", rank=None, world_size=None,
         **options):
    return dl.make_dataset(str(root), loader="pool", seed=seed, episodes=episodes, rank=rank, world_size=world_size,
                           delta_timestamps=delta_timestamps, image_dtype=image_dtype, loader_options=options)


def tagged(samples):
    """collate_fn that also says which DataLoader worker built the batch (0 in the main process)."""
    info = torch.utils.data.get_worker_info()
    return (0 if info is None else info.id), default_collate(samples)


def every_index(ds):
    """The global `index` of every frame of the dataset's selected episodes."""
    return [i for ep in ds.episodes for i in range(ep.dataset_from_index, ep.dataset_to_index)]


def consume(ds, num_workers, batch_size=3):
    """[(worker, batch)] of one pass of a plain DataLoader; batch is the collated dict."""
    return list(torch.utils.data.DataLoader(ds, batch_size=batch_size, num_workers=num_workers, collate_fn=tagged))


def consume_loader(loader):
    return list(loader)


def index_batches(tagged_batches):
    return [batch["index"].tolist() for _, batch in tagged_batches]


def flat(batches):
    return [i for b in batches for i in b]


def run_ranks(root, world_size, num_workers, batch_size=3, **options):
    """Iterate every rank of a world in this process: {(rank, worker): [(index, episode_index)]}, and
    the warnings each rank's iteration raised (only the main process's: num_workers=0 shows them all)."""
    out, warned = {}, {}
    for rank in range(world_size):
        ds = pool(root, rank=rank, world_size=world_size, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batches = consume(ds, num_workers, batch_size)
        warned[rank] = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        for worker in range(max(num_workers, 1)):
            out[(rank, worker)] = []
        for worker, batch in batches:
            out[(rank, worker)] += list(zip(batch["index"].tolist(), batch["episode_index"].tolist(), strict=True))
    return out, warned


def check_exactly_once(ds, per_consumer):
    indices = [i for samples in per_consumer.values() for i, _ in samples]
    assert Counter(indices) == Counter(every_index(ds))
    episodes = {c: {e for _, e in samples} for c, samples in per_consumer.items()}
    consumers = list(episodes)
    for a in range(len(consumers)):
        for b in range(a + 1, len(consumers)):
            assert not episodes[consumers[a]] & episodes[consumers[b]], (consumers[a], consumers[b])
    return episodes

def resumable(root, num_workers, batch_size, **kwargs):
    ds = pool(root, **kwargs)
    return dl.ResumableDataLoader(ds, batch_size=batch_size, num_workers=num_workers, collate_fn=tagged)
