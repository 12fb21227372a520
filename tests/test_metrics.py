"""The benchmark's pure statistics and result files."""

import csv
import json

import numpy as np
import pytest

from dl.bench.metrics import sample_latency_ms
from dl.bench.results import HEADLINE, flatten, read_results, write_csv
from dl.dataloader.shuffle import distinct_episode_fraction, ideal_distinct_fraction


def test_distinct_episode_fraction():
    assert distinct_episode_fraction(np.array([3, 3, 3, 3])) == 0.25
    assert distinct_episode_fraction(np.array([0, 1, 2, 3])) == 1.0
    assert distinct_episode_fraction(np.array([5, 1, 5, 2])) == 0.75


def test_ideal_fraction_matches_closed_form_and_simulation():
    # 128 equal episodes, batches of 16: 128/16 * (1 - (127/128)^16) ~= 0.94 (the figure LeRobot's benchmark cites)
    ideal = ideal_distinct_fraction([50] * 128, 16)
    assert ideal == pytest.approx(8 * (1 - (127 / 128) ** 16))
    assert 0.93 < ideal < 0.95
    rng = np.random.default_rng(0)
    draws = rng.integers(0, 128, size=(20000, 16))
    simulated = np.mean([len(np.unique(row)) / 16 for row in draws])
    assert ideal == pytest.approx(simulated, abs=0.005)


def test_ideal_fraction_weights_episodes_by_length():
    # one episode holding almost every frame: nearly every batch is one episode
    assert ideal_distinct_fraction([10_000, 1, 1], 8) < 0.2
    assert ideal_distinct_fraction([1], 4) == pytest.approx(0.25)


def test_sample_latency_percentiles():
    arrivals = [1.0, 2.0, 3.0, 7.0]  # gaps 1, 1, 1, 4 s over batches of 2 samples
    out = sample_latency_ms(arrivals, 0.0, 2)
    assert out["p50_sample_latency_ms"] == 500.0
    assert out["p99_sample_latency_ms"] == pytest.approx(np.percentile([500, 500, 500, 2000], 99), abs=1e-3)
    assert np.isnan(sample_latency_ms([], 0.0, 2)["p95_sample_latency_ms"])


def test_flatten_and_csv(tmp_path):
    results = [
        {"name": "a", "status": "ok", "samples_per_s": 10.0, "video_decoder_cache": {"hits": 3, "misses": 1},
         "dataset": {"cameras": ["cam0", "cam1"]}},
        {"name": "b", "status": "failed", "error": "boom"},
    ]
    assert flatten(results[0])["video_decoder_cache.hits"] == 3
    assert json.loads(flatten(results[0])["dataset.cameras"]) == ["cam0", "cam1"]
    write_csv(results, tmp_path / "r.csv")
    with open(tmp_path / "r.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == ["a", "b"]
    assert list(rows[0])[: len(HEADLINE)] == list(HEADLINE)
    assert rows[0]["video_decoder_cache.misses"] == "1" and rows[1]["error"] == "boom"


def test_read_results_marks_missing_file_failed(tmp_path):
    (tmp_path / "ok.json").write_text(json.dumps({"name": "ok", "status": "ok"}))
    out = read_results([tmp_path / "ok.json", tmp_path / "lost.json"])
    assert out[0]["status"] == "ok"
    assert out[1]["status"] == "failed" and out[1]["name"] == "lost"
