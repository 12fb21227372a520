"""dl.dataloader.inline_tensors: a worker's small tensors cross to the main process inside the pickled batch and
come out equal to default_collate's (values, dtype, shape), while large ones still go through shared memory."""

import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
import torch.utils.data
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from torch.utils.data import default_collate

import dl
from dl.dataloader.inline_tensors import INLINE_MAX_BYTES, InlineTensor, collate_inline

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]


@settings(max_examples=examples(60), deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 4), max_size=3), seed=st.integers(0, 2**16))
def test_an_inline_tensor_unpickles_to_an_equal_plain_tensor(dtype, shape, seed):
    g = torch.Generator().manual_seed(seed)
    tensor = torch.randint(0, 2 if dtype == torch.bool else 100, shape, generator=g).to(dtype)
    original = tensor.clone()
    back = pickle.loads(ForkingPickler.dumps(InlineTensor(tensor)))
    assert type(back) is torch.Tensor and back.dtype == dtype and back.shape == tensor.shape
    assert torch.equal(back, tensor) and back.is_contiguous() and not back.is_shared()
    back.fill_(0 if dtype == torch.bool else 101)  # writable, and not the sender's memory
    assert torch.equal(tensor, original)


def samples(n):
    return [{"index": torch.tensor(i), "state": torch.full((6,), float(i)), "is_pad": torch.tensor([i % 2 == 0]),
             "task": f"task {i}", "wide": torch.full((INLINE_MAX_BYTES // 8,), i, dtype=torch.float32)}
            for i in range(n)]


def test_outside_a_worker_the_result_is_default_collates():
    ours, theirs = collate_inline(samples(4)), default_collate(samples(4))
    assert list(ours) == list(theirs) and ours["task"] == theirs["task"]
    for key in ("index", "state", "is_pad", "wide"):
        assert type(ours[key]) is torch.Tensor and ours[key].dtype == theirs[key].dtype
        assert torch.equal(ours[key], theirs[key])


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return samples(8)[i]


def test_from_a_worker_small_tensors_arrive_inline_and_large_ones_in_shared_memory():
    loader = torch.utils.data.DataLoader(Samples(), batch_size=4, num_workers=1, collate_fn=collate_inline)
    batches = list(loader)
    assert [b["index"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for batch, expected in zip(batches, (default_collate(samples(8)[:4]), default_collate(samples(8)[4:])),
                               strict=True):
        for key in ("index", "state", "is_pad", "wide"):
            assert batch[key].dtype == expected[key].dtype and torch.equal(batch[key], expected[key])
        assert not batch["index"].is_shared() and not batch["state"].is_shared() and not batch["is_pad"].is_shared()
        assert batch["wide"].is_shared(), "4 x 32 KiB is over INLINE_MAX_BYTES: shared memory, as torch does"
        assert batch["task"] == expected["task"]


@pytest.mark.parametrize("loader", ["map", "pool"])
def test_dl_batches_from_workers_equal_batches_read_in_process(small_dataset, loader):
    options = {"episode_pool_size": 2} if loader == "pool" else {}

    def batches(num_workers):
        dataset = dl.make_dataset(str(small_dataset), loader=loader, seed=5, image_dtype="uint8",
                                  loader_options=options)
        out = list(dl.make_dataloader(dataset, batch_size=4, num_workers=num_workers))
        return {int(i): {k: v[j] for k, v in b.items()}
                for b in out for j, i in enumerate(b["index"])}

    got, expected = batches(2), batches(0)
    assert sorted(got) == sorted(expected)
    for index, sample in expected.items():
        assert list(got[index]) == list(sample)
        for key, value in sample.items():
            if isinstance(value, torch.Tensor):
                assert got[index][key].dtype == value.dtype and torch.equal(got[index][key], value), (index, key)
            else:
                assert got[index][key] == value, (index, key)
