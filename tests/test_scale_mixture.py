"""A mixture of many members (issue 68), at a small size: 20 generated datasets of different sizes through
`dl.make_mixture`, each member's quota served, resuming exactly from a cut mid-epoch with 2 DataLoader workers."""

import importlib.util
import itertools
import json
from pathlib import Path

import pytest
from mixture_helpers import members_of, per_member

import dl

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "scale_dataset.py"
_spec = importlib.util.spec_from_file_location("scale_dataset", SCRIPT)
scale_dataset = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scale_dataset)
MEMBERS, SAMPLES, BATCH = 20, 400, 8


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """20 datasets of 2 to 59 episodes (3 i + 2), 6 per data and video file."""
    base = tmp_path_factory.mktemp("many")
    return [scale_dataset.write_scale_dataset(base / f"m{i:02d}", 3 * i + 2, per_file=6) for i in range(MEMBERS)]


def mixture(roots):
    members = [dl.make_dataset(str(root), loader="map", seed=i, features=["observation.state"])
               for i, root in enumerate(roots)]
    return dl.make_mixture(members, "frames", samples_per_epoch=SAMPLES, seed=5)


def test_many_members_serve_their_quotas(roots):
    mix = mixture(roots)
    pairs = members_of(dl.make_dataloader(mix, batch_size=BATCH, num_workers=2))
    counts = per_member(pairs)
    assert len(pairs) == SAMPLES and sorted(counts) == list(range(MEMBERS))
    assert [sum(counts[m].values()) for m in range(MEMBERS)] == list(mix.quotas)


@pytest.mark.parametrize("cut", [0, 7, SAMPLES // BATCH - 1])
def test_many_members_resume_exactly(roots, cut):
    whole = dl.make_dataloader(mixture(roots), batch_size=BATCH, num_workers=2)
    expected = members_of(whole)
    following = members_of(whole)
    interrupted = dl.make_dataloader(mixture(roots), batch_size=BATCH, num_workers=2)
    got = members_of(itertools.islice(interrupted, cut))
    state = json.loads(json.dumps(interrupted.state_dict()))
    del interrupted
    resumed = dl.make_dataloader(mixture(roots), batch_size=BATCH, num_workers=2)
    resumed.load_state_dict(state)
    assert got + members_of(resumed) == expected
    assert members_of(resumed) == following, "the epoch after the resumed one differs"
