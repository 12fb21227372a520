"""Loaders over the remote sources through a fault-injecting proxy on loopback (connections reset in the
middle of response bodies, 429 with Retry-After, 503): every frame arrives exactly once and the retries are
counted; a file that is really gone fails with an error naming it; a permanent error is not retried."""

import logging

import numpy as np
import pytest
from remote_helpers import hub, loopback_hub_source, publish, s3, s3_source, upload  # noqa: F401 (fixtures)

import dl
from dl.contracts.errors import SourceFileNotFoundError
from dl.format.metadata import DatasetMeta
from dl.host.assembly import build_loader
from dl.kits.remote.host_cache import BLOCK_BYTES
from dl.kits.video_indexes import indexes_of
from dl.plugins.remote.bucket import bucket_source
from dl.testing.fault_proxy import FaultProxy, Faults

FAULTS = Faults(throttle_every=5, unavailable_every=7, reset_every=3, reset_after_bytes=700, per_request=2)
"""Faults on ~54% of requests by arrival order, but at most 2 per distinct request: by arrival order alone, the
requests of concurrent threads interleave so that one range's every retry can land on a fault (with 6 tries, about
once in 100 ranges: a flaky test). With the bound, a retried call, which makes at most 2 distinct requests (s3fs's
HEAD and GET of a whole file, a listing's pages), fails at most 4 times: the default 6 tries always get through."""


def frames_seen(source, loader: str, num_workers: int) -> np.ndarray:
    meta = DatasetMeta.load(source)
    dataset = build_loader(meta, loader, "cpu", config=dl.LoaderConfig(image_dtype="uint8")).loader
    batches = list(dl.make_dataloader(dataset, batch_size=8, num_workers=num_workers))
    return np.sort(np.concatenate([b["index"].numpy() for b in batches])), meta.total_frames


@pytest.mark.parametrize(("loader", "prefetch", "num_workers"), [("pool", True, 2), ("pool", False, 0),
                                                                  ("map", True, 0)])
def test_bucket_every_frame_exactly_once_under_faults(s3, small_dataset, loader, prefetch, num_workers):  # noqa: F811
    url = upload(s3, small_dataset)
    with FaultProxy(s3.endpoint_url, faults=FAULTS) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url, prefetch=prefetch, block_size=64 << 10)
        seen, total = frames_seen(source, loader, num_workers)
        stats = source.figures()
    assert seen.tolist() == list(range(total))
    assert proxy.injected["429"] and proxy.injected["503"] and proxy.injected["reset"]
    assert stats["retries"] > 0 and stats["throttled_429"] > 0 and stats["failures"] == 0


def test_real_layout_every_frame_exactly_once_under_faults(s3, dataset_factory):  # noqa: F811
    """LeRobot's layout: many episodes per video and data file, one row group per data file; the pool's workers
    fetch each episode's ranges through resets, 429s and 503s."""
    root = dataset_factory(episodes=12, episodes_per_file=12, frames_per_episode=(20, 30), row_group_size=None)
    url = upload(s3, root)
    with FaultProxy(s3.endpoint_url, faults=FAULTS) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url)
        seen, total = frames_seen(source, "pool", 2)
        stats = source.figures()
    assert seen.tolist() == list(range(total))
    assert proxy.injected["429"] and proxy.injected["503"] and proxy.injected["reset"]
    assert stats["retries"] > 0 and stats["failures"] == 0 and stats["ranges_prefetched"] > 0


def test_every_process_of_the_host_shares_one_cache_folder(s3, small_dataset, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DL_HOSTNAME", "node-a")
    source = s3_source(s3, upload(s3, small_dataset), cache_dir=str(tmp_path / "node-local"))
    seen, total = frames_seen(source, "pool", 2)
    assert seen.tolist() == list(range(total)) and source.figures()["ranges_prefetched"] > 0
    assert [p.name for p in (tmp_path / "node-local").iterdir()] == ["host-node-a"]
    blocks = [p for p in (tmp_path / "node-local" / "host-node-a").iterdir() if p.suffix not in (".lock", ".tmp")]
    assert blocks, "the workers wrote no block into the host's folder"
    assert not list((tmp_path / "dl-cache").rglob("host-*")), "a cache went to the default place"
    source.reset_stats()
    assert frames_seen(source, "pool", 2)[0].tolist() == list(range(total))  # another run on this host
    stats = source.figures()
    assert stats["bytes_prefetched"] == 0 and stats["cache_hits"] > 0, "the second run fetched what the host holds"


def test_map_says_how_much_it_downloads(s3, dataset_factory, caplog):  # noqa: F811
    """Files big enough that ranges are smaller than the files (the small dataset's ~10 KB videos are smaller
    than the decoder's 64 KiB read-ahead), at a camera's bitrate (texture)."""
    root = dataset_factory(frames_per_episode=(60, 60), width=320, height=240, texture=44)
    source = s3_source(s3, upload(s3, root))
    meta = DatasetMeta.load(source)
    with caplog.at_level(logging.INFO, logger="dl"):
        dataset = build_loader(meta, "map", "cpu", config=dl.LoaderConfig(episodes=[0, 1], image_dtype="uint8")).loader
    files = sorted({f for i in (0, 1) for f in meta.episodes[i].files()})
    whole = sum(meta.files[f] for f in files) / 1e6
    spans = [span for i in (0, 1) for span in meta.file_spans(meta.episodes[i])]
    need = source.prepare(spans)  # indexed already: what the loader's own `prepare` returned
    assert f"2 episode(s) need {need / 1e6:.1f} MB of {len(files)} file(s) ({whole:.1f} MB " \
        f"whole), from {source.url}" in caplog.text
    assert need < sum(meta.files[f] for f in files)  # ranges, not the whole files
    assert len([dataset[i] for i in range(len(dataset))]) == 120
    ranges = source.plans.pieces(spans, meta.files.get, indexes_of(source))[0]
    # the blocks holding the ranges, each range at most two blocks beyond its bytes
    assert source.figures()["bytes_prefetched"] <= need + 2 * BLOCK_BYTES * len(ranges)


def test_metadata_from_the_hub_and_data_from_a_bucket(s3, hub, small_dataset, monkeypatch):  # noqa: F811
    repo, url = publish(hub, small_dataset), upload(s3, small_dataset)
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    start = len(hub.requests)
    source = bucket_source(f"hf://datasets/{repo}", data_files_root=url, storage_options=s3.storage_options())
    assert source.pinned_options() == {"revision": hub.repos[repo]["main"]}
    seen, total = frames_seen(source, "pool", 0)
    assert seen.tolist() == list(range(total))
    served = [path for _, path in hub.requests[start:]]
    assert any("/meta/" in p for p in served) and not any("/data/" in p or "/videos/" in p for p in served)


def test_hub_every_frame_exactly_once_under_faults(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    with FaultProxy(hub.endpoint, faults=FAULTS) as proxy:
        source = loopback_hub_source(hub, repo, proxy.endpoint_url)
        seen, total = frames_seen(source, "pool", 2)
        stats = source.figures()
    assert seen.tolist() == list(range(total))
    assert stats["retries"] > 0 and stats["failures"] == 0


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_file_really_gone_fails_naming_it(s3, small_dataset, prefetch):  # noqa: F811
    url = upload(s3, small_dataset)
    source = s3_source(s3, url, prefetch=prefetch)
    meta = DatasetMeta.load(source)  # lists the video
    gone = meta.episodes[3].videos[meta.video_keys[0]].path
    s3.filesystem().rm(f"{url.removeprefix('s3://')}/{gone}")
    with pytest.raises(dl.DlError, match=gone.replace(".", r"\.")):  # when the loader opens it, or reads it
        config = dl.LoaderConfig(episodes=[3], image_dtype="uint8")
        dataset = build_loader(meta, "pool", "cpu", config=config).loader
        list(dl.make_dataloader(dataset, batch_size=4, num_workers=0))


def test_missing_file_is_not_retried(s3, small_dataset):  # noqa: F811
    source = s3_source(s3, upload(s3, small_dataset))
    with pytest.raises(SourceFileNotFoundError, match="meta/nope.json"):
        source.read_bytes("meta/nope.json")
    assert source.figures()["requests"] == 1 and source.figures()["retries"] == 0


def test_each_request_fails_at_most_per_request_times(s3, small_dataset):  # noqa: F811
    """The proxy's bound: every try of a request fails until it failed `per_request` times, then it goes through;
    another request (another range) gets its own faults."""
    url = upload(s3, small_dataset)
    with FaultProxy(s3.endpoint_url, faults=Faults(unavailable_every=1, per_request=2)) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url, retry_attempts=3)
        head, rest = source.read_bytes("meta/info.json", 0, 10), source.read_bytes("meta/info.json", 10, 30)
    assert head + rest == (small_dataset / "meta/info.json").read_bytes()[:30]
    assert proxy.injected["503"] == 4 and proxy.requests == 6
    stats = source.figures()  # every try is counted: none hidden in s3fs or botocore
    assert stats["requests"] == 6 and stats["retries"] == 4 and stats["failures"] == 0


def test_gives_up_with_the_url_when_the_server_keeps_failing(s3, small_dataset):  # noqa: F811
    url = upload(s3, small_dataset)
    with FaultProxy(s3.endpoint_url, faults=Faults(unavailable_every=1)) as proxy:
        source = s3_source(s3, url, proxy.endpoint_url, retry_attempts=3)
        with pytest.raises(dl.DlError, match=r"meta/info\.json failed after 3 attempt\(s\).*HTTP 503"):
            source.read_bytes("meta/info.json")
    assert source.figures()["requests"] == 3 and source.figures()["failures"] == 1
