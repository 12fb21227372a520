"""The `hub` source against dl's loopback Hub API server: the revision is resolved to a commit once and
every read is pinned to it; metadata is read once (DataLoader workers ask nothing about it); an LFS file is
resolved once and its ranges read from the CDN URL it redirects to, without the token; offline mode serves the
local Hugging Face cache; clear errors for unknown repos, revisions and dataset versions."""

import json
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from remote_helpers import hub, loopback_hub_source, publish  # noqa: F401 (fixtures)

import dl
from dl.contracts.errors import DatasetFormatError, DlError
from dl.format.metadata import DatasetMeta
from dl.host.assembly import build_loader


def requests_since(hub, start: int, part: str) -> list[str]:  # noqa: F811
    return [path for _, path in hub.requests[start:] if part in path]


def test_reads_stay_on_the_resolved_commit_after_a_push(hub, small_dataset, tmp_path):  # noqa: F811
    repo = publish(hub, small_dataset)
    source = loopback_hub_source(hub, repo, revision="main")
    first = source.pinned_options()["revision"]
    edited = tmp_path / "edited"
    shutil.copytree(small_dataset, edited)
    (edited / "meta" / "stats.json").write_text("{}")
    assert hub.add_revision(repo, edited) != first  # a push to main while "training"
    assert source.read_bytes("meta/stats.json") == (small_dataset / "meta" / "stats.json").read_bytes()
    assert loopback_hub_source(hub, repo).read_bytes("meta/stats.json") == b"{}"


def test_a_pinned_sha_asks_nothing_about_the_revision(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    sha = loopback_hub_source(hub, repo).pinned_options()["revision"]
    start = len(hub.requests)
    source = loopback_hub_source(hub, repo, revision=sha)
    assert source.url == f"hf://datasets/{repo}@{sha}"
    assert requests_since(hub, start, "/revision/") == []


def test_workers_do_not_read_metadata_again(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    meta = DatasetMeta.load(loopback_hub_source(hub, repo))
    dataset = build_loader(meta, "pool", "cpu", config=dl.LoaderConfig(image_dtype="uint8")).loader
    start = len(hub.requests)
    frames = sum(len(b["index"]) for b in dl.make_dataloader(dataset, batch_size=8, num_workers=2))
    assert frames == meta.total_frames
    assert requests_since(hub, start, "/meta/") == [] and requests_since(hub, start, "/tree/") == []
    assert requests_since(hub, start, "/revision/") == []
    assert requests_since(hub, start, "/resolve/") == []  # the host's CDN URLs came with the source
    assert requests_since(hub, start, "/cdn/") != []


def video_ranges(folder, pieces: int) -> tuple[str, bytes, list[tuple[int, int]]]:
    """A video file of `folder` (repo path), its bytes, and `pieces` ranges cutting it."""
    path = sorted((folder / "videos").rglob("*.mp4"))[0]
    data = path.read_bytes()
    cuts = [len(data) * i // pieces for i in range(pieces + 1)]
    return path.relative_to(folder).as_posix(), data, list(zip(cuts[:-1], cuts[1:], strict=True))


def test_an_lfs_file_is_resolved_once_and_read_from_the_cdn_without_the_token(hub, small_dataset,  # noqa: F811
                                                                               monkeypatch):
    token = "hf_loopbackCdn456"
    monkeypatch.setenv("HF_TOKEN", token)
    repo = publish(hub, small_dataset)
    source = loopback_hub_source(hub, repo)
    rel, data, ranges = video_ranges(small_dataset, 5)
    start, before = len(hub.requests), source.figures()["requests"]
    assert b"".join(source.read_bytes(rel, lo, hi) for lo, hi in ranges) == data
    served = [path for _, path in hub.requests[start:]]
    assert [p for p in served if "/resolve/" in p] == [f"/datasets/{repo}/resolve/{source.sha}/{rel}"]
    assert len([p for p in served if p.startswith("/cdn/")]) == len(ranges) and len(served) == len(ranges) + 1
    assert source.figures()["requests"] - before == len(served)  # the redirect counted too
    assert f"Bearer {token}" in hub.authorizations and hub.cdn_authorizations == []  # the token stays on the Hub


def test_threads_reading_one_file_at_once_resolve_it_once(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    source = loopback_hub_source(hub, repo)
    rel, data, ranges = video_ranges(small_dataset, 6)
    start, ready = len(hub.requests), threading.Barrier(len(ranges))

    def read(piece):
        ready.wait(timeout=30)
        return source.read_bytes(rel, *piece)

    with ThreadPoolExecutor(len(ranges)) as pool:
        assert b"".join(pool.map(read, ranges)) == data
    assert len(requests_since(hub, start, "/resolve/")) == 1 and len(requests_since(hub, start, "/cdn/")) == 6


def test_a_cdn_url_refused_is_resolved_again(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    source = loopback_hub_source(hub, repo)
    rel, data, ranges = video_ranges(small_dataset, 2)
    (a, b), (c, d) = ranges
    assert source.read_bytes(rel, a, b) == data[a:b]
    hub.revoke_links()  # as when the signature expires
    start = len(hub.requests)
    assert source.read_bytes(rel, c, d) == data[c:d]
    served = [path for _, path in hub.requests[start:]]
    assert [p.split("/")[1] for p in served] == ["cdn", "datasets", "cdn"]  # refused, resolved, served
    assert source.figures()["retries"] == 0 and source.figures()["failures"] == 0


def test_unknown_repo_and_revision(hub, small_dataset):  # noqa: F811
    with pytest.raises(DlError, match="no dataset repo tests/missing on http://127.0.0.1"):
        loopback_hub_source(hub, "tests/missing")
    repo = publish(hub, small_dataset)
    with pytest.raises(DlError, match=f"dataset {repo} on .* has no revision 'v9'"):
        loopback_hub_source(hub, repo, revision="v9")
    with pytest.raises(DlError, match="give a Hub dataset repo as owner/name"):
        loopback_hub_source(hub, "just-a-name")


def test_refuses_another_dataset_version_and_reads_an_untagged_main(hub, small_dataset, tmp_path):  # noqa: F811
    old = tmp_path / "v21"
    shutil.copytree(small_dataset, old)
    info = json.loads((old / "meta" / "info.json").read_text())
    (old / "meta" / "info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    repo = publish(hub, old)
    with pytest.raises(DatasetFormatError, match="LeRobot v2.1 dataset; dl reads v3.0"):
        DatasetMeta.load(loopback_hub_source(hub, repo))
    untagged = publish(hub, small_dataset)  # no version tag: main named explicitly works
    assert DatasetMeta.load(loopback_hub_source(hub, untagged, revision="main")).total_frames > 0


def test_token_is_never_an_option(hub, small_dataset):  # noqa: F811
    repo = publish(hub, small_dataset)
    with pytest.raises(DlError, match="HF_TOKEN"):
        dl.make_dataset(repo, source="hub", source_options={"storage_options": {"endpoint": hub.endpoint,
                                                                                 "token": "hf_x"}})


OFFLINE = """
import sys, dl
dataset = dl.make_dataset(sys.argv[1], source="hub", loader="map", image_dtype="uint8")
print(len(dataset), dataset.meta.source.url)
"""


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_offline_mode_reads_the_local_hugging_face_cache(hub, small_dataset, tmp_path):  # noqa: F811
    repo = publish(hub, small_dataset)
    env = {"HF_ENDPOINT": hub.endpoint, "HF_HUB_CACHE": str(tmp_path / "hf"), "DL_CACHE_DIR": str(tmp_path / "dl"),
           "PATH": "/usr/bin:/bin"}
    run = lambda **extra: subprocess.run([sys.executable, "-c", OFFLINE, repo], capture_output=True, text=True,  # noqa: E731
                                         timeout=120, env={**env, **extra})
    missing = run(HF_HUB_OFFLINE="1")
    assert missing.returncode != 0 and "HF_HUB_OFFLINE is set" in missing.stderr and "hf download" in missing.stderr
    fill = subprocess.run([sys.executable, "-c", "import sys; from huggingface_hub import snapshot_download; "
                           "snapshot_download(sys.argv[1], repo_type='dataset')", repo], capture_output=True,
                          text=True, timeout=120, env=env)
    assert fill.returncode == 0, fill.stderr
    start = len(hub.requests)
    offline = run(HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert len(hub.requests) == start  # not one request offline
    frames = DatasetMeta.load(loopback_hub_source(hub, repo)).total_frames
    assert offline.stdout.split()[0] == str(frames) and str(tmp_path / "hf") in offline.stdout
