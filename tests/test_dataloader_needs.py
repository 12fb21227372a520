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
