"""`dl run --mix`: the benchmark measures mixtures (members from any source, keys renamed), and `dl report` shows
each member's share of samples next to its weight."""

import json
import math
import os
import subprocess
import sys

import pytest
from cli_helpers import invoke
from mixture_helpers import TO_A
from remote_helpers import hub, publish, s3, upload  # noqa: F401 (fixtures)

QUICK = ["--duration", "1.5", "--warmup-batches", "1", "--single-proc-samples", "4", "--batch-size", "4"]
RENAME = [f"--mix-rename={old}={new}" for old, new in TO_A.items()]


def dl(*args, cwd, env=None):
    cmd = [sys.executable, "-c", "from dl.cli.main import main; main()", *map(str, args)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.slow
def test_mixture_run_with_a_bucket_member_and_its_report(s3, mixture_roots, tmp_path):  # noqa: F811
    """a (local) at weight 0.7, b (on loopback S3, its keys renamed) at 0.3, through the pool loader."""
    url = upload(s3, mixture_roots["b"])
    out = tmp_path / "out"
    done = dl("run", "--mix", f"{mixture_roots['a']}:0.7", "--mix", f"{url}:0.3", *RENAME, "--loader", "pool",
              "--storage-option", f"endpoint_url={s3.endpoint_url}", "--storage-option", "key=testing",
              "--storage-option", "secret=testing", "--num-workers", "2", "--out-dir", out, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "mix2-pool-cpu-single-w2.json").read_text())
    assert result["status"] == "ok" and result["samples_per_s"] > 0
    stats = result["loader_stats"]
    assert stats["weights"] == [0.7, 0.3] and stats["members"] == ["dataset", url.rsplit("/", 1)[1]]
    drawn = [stats["member0_samples"], stats["member1_samples"]]
    n = sum(drawn)
    assert abs(drawn[0] - 0.7 * n) <= 4 * math.sqrt(n * 0.7 * 0.3) + 1, drawn
    members = result["dataset"]["members"]
    assert [m["fps"] for m in members] == [30, 15] and members[1]["root"] == url
    assert result["dataset"]["cameras"] == ["observation.images.cam0"]
    remote = result["source_stats"]  # the bucket member's figures (its bytes from the store or the host's cache)
    assert remote["bytes_needed"] > 0 and remote["cache_hits"] > 0
    assert result["config"]["mix"][1]["source"] == "bucket"
    assert result["config"]["mix"][1]["source_options"]["storage_options"]["secret"] == "<redacted>"
    assert result["decode_ceiling"] is None  # a per-dataset figure
    report = invoke("report", out)
    assert report.exit_code == 0, report.output
    assert "share of samples against weight" in report.output
    line = next(row for row in report.output.splitlines() if f"│ {stats['members'][1]} " in row)
    assert "0.3" in line and str(stats["member1_samples"]) in line


@pytest.mark.slow
def test_a_hub_member_is_read_through_the_hub_source_pinned_once(hub, mixture_roots, tmp_path):  # noqa: F811
    repo = publish(hub, mixture_roots["tabular"])
    sha = hub.repos[repo]["main"]
    out = tmp_path / "out"
    done = dl("run", "--mix", mixture_roots["tabular_small"], "--mix", f"hf://datasets/{repo}", "--mix-weights",
              "episodes", "--num-workers", "1", "--out-dir", out, *QUICK, cwd=tmp_path,
              env={**os.environ, "HF_ENDPOINT": hub.endpoint})
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "mix2-map-cpu-single-w1.json").read_text())
    assert result["status"] == "ok" and result["loader_stats"]["weights"] == [0.3, 0.7]  # 3 and 7 episodes
    member = result["config"]["mix"][1]
    assert member["source"] == "hub" and member["source_options"]["revision"] == sha
    assert result["dataset"]["members"][1]["root"] == f"hf://datasets/{repo}@{sha}"


def test_members_that_cannot_be_mixed_are_refused_before_any_run(mixture_roots, tmp_path):
    done = invoke("run", "--mix", mixture_roots["a"], "--mix", mixture_roots["c"], "--mix-feature",
                  "observation.images.cam0", "--out-dir", tmp_path / "out")
    assert done.exit_code == 2
    assert done.output.startswith("Error: mixture camera 'observation.images.cam0' has frames of different sizes")
    assert "resize=(height, width)" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "out" / "specs" / "submission.json").exists()


def test_mix_options_are_checked(mixture_roots, tmp_path):
    both = invoke("run", "--root", mixture_roots["a"], "--mix", mixture_roots["c"], "--out-dir", tmp_path / "out")
    assert both.exit_code == 2 and "give --root or --mix members, not both" in both.output
    some = invoke("run", "--mix", f"{mixture_roots['a']}:2", "--mix", mixture_roots["c"], "--out-dir", tmp_path / "o")
    assert some.exit_code == 2 and "give every --mix member a :WEIGHT, or none" in some.output
    bad = invoke("run", "--mix", f"{mixture_roots['a']}:-1", "--out-dir", tmp_path / "o")
    assert bad.exit_code == 2 and "must be a positive number" in bad.output
