"""`dl run` through the remote sources from the command line, against loopback servers: `--source bucket
--root s3://... --storage-option endpoint_url=...`, `--source hub --repo-id ... --revision ...` (the host
resolves the revision once and every run reads that commit; HF_ENDPOINT and HF_TOKEN honoured, the token
written nowhere), and the stream_bucket_2node scenario."""

import json
import os
import subprocess
import sys

import pytest
from remote_helpers import hub, publish, s3, upload  # noqa: F401 (fixtures)

from dl.kits.remote.host_cache import host_name

QUICK = ["--duration", "1", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]


def dl_run(*args, cwd, env=None):
    cmd = [sys.executable, "-c", "from dl.cli.main import main; main()", "run", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def storage(s3, name="endpoint_url"):  # noqa: F811
    return ["--storage-option", f"{name}={s3.endpoint_url}", "--storage-option", "key=testing",
            "--storage-option", "secret=testing"]


@pytest.mark.slow
def test_bucket_run_reports_network_figures(s3, small_dataset, tmp_path):  # noqa: F811
    url = upload(s3, small_dataset)
    out = tmp_path / "out"
    node_local = tmp_path / "node-local"
    done = dl_run("--source", "bucket", "--root", url, *storage(s3), "--loader", "pool", "--num-workers", "2",
                  "--cache-dir", node_local, "--out-dir", out, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "pool-cpu-single-w2.json").read_text())
    assert result["config"]["source_options"]["cache_dir"] == str(node_local)
    assert [p.name for p in node_local.iterdir()] == [f"host-{host_name()}"]  # one folder for every process
    stats = result["source_stats"]
    assert result["status"] == "ok" and stats["failures"] == 0 and stats["bytes_needed"] > 0
    # the window's bytes come from the store, or from the host's cache (the single-process pass filled it)
    assert stats["bytes_fetched"] >= stats["bytes_prefetched"]
    assert stats["read_amplification"] is not None  # below 1 where the host's cache holds blocks already
    assert stats["cache_hits"] > 0
    assert "fetched / needed" in done.stdout  # the source's figures, in words
    assert "Traceback" not in done.stderr  # the progress thread survives piped output
    assert "metadata_s" in stats
    written = result["config"]["source_options"]["storage_options"]
    assert written == {"endpoint_url": s3.endpoint_url, "key": "<redacted>", "secret": "<redacted>"}


@pytest.mark.slow
def test_hub_run_pins_the_revision_once(hub, small_dataset, tmp_path):  # noqa: F811
    repo = publish(hub, small_dataset)
    sha = hub.repos[repo]["main"]
    out = tmp_path / "out"
    start = len(hub.requests)
    token = "hf_loopbackSecret123"
    done = dl_run("--source", "hub", "--repo-id", repo, "--revision", "main", "--loader", "pool", "--num-workers",
                  "0,1", "--out-dir", out, *QUICK, cwd=tmp_path,
                  env={**os.environ, "HF_ENDPOINT": hub.endpoint, "HF_TOKEN": token})
    assert done.returncode == 0, done.stderr
    assert f"Bearer {token}" in hub.authorizations  # sent to the Hub...
    written = "".join(p.read_text() for p in out.rglob("*.json")) + done.stdout + done.stderr
    assert token not in written  # ...and nowhere else
    for name in ("pool-cpu-single-w0", "pool-cpu-single-w1"):
        result = json.loads((out / f"{name}.json").read_text())
        assert result["status"] == "ok" and result["config"]["source_options"]["revision"] == sha
        assert result["dataset"]["root"] == f"hf://datasets/{repo}@{sha}"
    served = [path for _, path in hub.requests[start:]]
    assert [p for p in served if "/revision/" in p] == [f"/api/datasets/{repo}/revision/main"]  # the host, once
    assert [p for p in served if p.endswith("/meta/info.json")] == [f"/datasets/{repo}/resolve/{sha}/meta/info.json"]


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_options_a_source_does_not_take_fail_before_running(tmp_path):
    done = dl_run("--source", "hub", "--repo-id", "a/b", "--data-files-root", "s3://x/y", "--out-dir",
                  tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2
    assert "source 'hub' (dl) does not take option data_files_root" in done.stderr + done.stdout


@pytest.mark.slow
def test_stream_bucket_2node_serves_a_local_root_on_loopback(small_dataset, tmp_path):
    out = tmp_path / "out"
    done = dl_run("--scenario", "stream_bucket_2node", "--root", small_dataset, "--num-workers", "1",
                  "--loader-option", "episode_pool_size=2", "--out-dir", out, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "loopback S3" in done.stdout
    merged = json.loads((out / "stream_bucket_2node-cpu-single-w1-r2.json").read_text())
    assert merged["status"] == "ok" and merged["world_size"] == 2
    ranks = merged["ranks"]
    assert merged["source_stats"]["bytes_needed"] == sum(r["source_stats"]["bytes_needed"] for r in ranks) > 0
    assert merged["dataset"]["root"].startswith("s3://dl-loopback/")
