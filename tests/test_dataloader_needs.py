"""The DataLoader is built in one place (dl.dataloader.build) from what the loader, its decoder and its source
need of it; contradictions are refused naming both sides."""

import pytest
import torch.multiprocessing

import dl
from dl.contracts.errors import PluginError
from dl.contracts.needs import DataLoaderNeeds, merge_needs
from dl.plugins.cpu_decoder import CpuDecoder
from dl.testing.synthetic import read_frame_code


class SpawnOnlyDecoder(CpuDecoder):
    """A CPU decoder that says it needs spawned workers (as a CUDA decoder does)."""

    def dataloader_needs(self):
        return DataLoaderNeeds(multiprocessing_context="spawn", pin_memory=False)


def test_merge_keeps_what_each_needs():
    merged = merge_needs({"decoder a": DataLoaderNeeds(multiprocessing_context="spawn"),
                          "loader b": DataLoaderNeeds(pin_memory=False), "source c": DataLoaderNeeds()})
    assert merged == DataLoaderNeeds(multiprocessing_context="spawn", pin_memory=False)
    assert merged.recorded() == {"multiprocessing_context": "spawn", "pin_memory": False}


def test_merge_refuses_a_contradiction_naming_both():
    with pytest.raises(PluginError, match=r"decoder nvdec needs DataLoader multiprocessing_context='spawn' but "
                                          r"source x needs 'fork'"):
        merge_needs({"decoder nvdec": DataLoaderNeeds(multiprocessing_context="spawn"),
                     "source x": DataLoaderNeeds(multiprocessing_context="fork")})


def test_a_source_that_needs_forkserver_takes_spawn_where_a_decoder_needs_it():
    merged = merge_needs({"source bucket": DataLoaderNeeds(multiprocessing_context="forkserver"),
                          "decoder nvdec": DataLoaderNeeds(multiprocessing_context="spawn")})
    assert merged.multiprocessing_context == "spawn"
    with pytest.raises(PluginError, match="forkserver"):
        merge_needs({"source bucket": DataLoaderNeeds(multiprocessing_context="forkserver"),
                     "loader x": DataLoaderNeeds(multiprocessing_context="fork")})


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_a_decoder_that_needs_spawn_gets_spawned_workers(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    dataset.decoder = SpawnOnlyDecoder()
    dataset.builder.decoder = dataset.decoder
    loader = dl.make_dataloader(dataset, batch_size=8, num_workers=1)
    assert loader.multiprocessing_context is torch.multiprocessing.get_context("spawn")
    assert loader.pin_memory is False
    seen = []
    for batch in loader:
        for frame, index in zip(batch["observation.images.cam0"], batch["index"].tolist(), strict=True):
            assert read_frame_code(frame) == (index, 0)
            seen.append(index)
    assert sorted(seen) == list(range(len(dataset)))


def test_the_caller_cannot_override_a_need(small_dataset):
    dataset = dl.make_dataset(str(small_dataset))
    dataset.decoder = SpawnOnlyDecoder()
    with pytest.raises(PluginError, match="the caller needs DataLoader multiprocessing_context='fork'"):
        dl.make_dataloader(dataset, num_workers=1, multiprocessing_context="fork")


def test_map_loader_gives_its_sampler_and_resumes(small_dataset):
    dataset = dl.make_dataset(str(small_dataset))
    loader = dl.make_dataloader(dataset, batch_size=4)
    assert isinstance(loader, dl.ResumableDataLoader) and loader.sampler is dataset.sampler


def test_out_of_order_batches_are_refused_for_a_resumable_loader(small_dataset):
    dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8")
    with pytest.raises(dl.DlError, match=r"in_order=False .* a resume would repeat or skip samples"):
        dl.make_dataloader(dataset, batch_size=4, num_workers=1, in_order=False)
    assert dl.make_dataloader(dataset, batch_size=4, num_workers=1, in_order=True) is not None


@pytest.mark.parametrize(("batch_size", "cut", "resume_batch_size", "world_size"),
                         [(4, 3, 4, 1), (4, 0, 4, 1), (5, 2, 3, 1), (4, 5, 4, 2), (3, 1, 8, 1)])
def test_len_after_load_state_dict_counts_what_is_left(small_dataset, batch_size, cut, resume_batch_size,
                                                       world_size):
    def loader(size, rank=0):
        dataset = dl.make_dataset(str(small_dataset), image_dtype="uint8", rank=rank, world_size=world_size)
        return dl.make_dataloader(dataset, batch_size=size)

    first = loader(batch_size)
    iterator = iter(first)
    for _ in range(cut):
        next(iterator)
    state = first.state_dict()
    resumed = loader(resume_batch_size)
    resumed.load_state_dict(state)
    expected = len(resumed)
    served = sum(1 for _ in resumed)
    assert expected == served, f"len() said {expected} batches, {served} were served"
    assert len(resumed) == len(loader(resume_batch_size)), "after the resumed epoch, len() is a whole epoch again"


def test_worker_counts_past_what_the_machine_runs_are_refused(small_dataset, monkeypatch):
    from dl.dataloader.world import max_workers

    monkeypatch.delenv("DL_MAX_WORKERS", raising=False)
    limit, why = max_workers()
    assert limit >= 1 and "per core" in why
    dataset = dl.make_dataset(str(small_dataset))
    with pytest.raises(dl.DlError, match=rf"num_workers={limit + 1}: this machine can run at most {limit} "
                                         rf"DataLoader workers .* set DL_MAX_WORKERS={limit + 1} to allow it"):
        dl.make_dataloader(dataset, num_workers=limit + 1)
    monkeypatch.setenv("DL_MAX_WORKERS", str(limit + 1))
    assert dl.make_dataloader(dataset, num_workers=limit + 1).num_workers == limit + 1
