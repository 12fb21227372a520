"""Whether a peer loader (`dl.contracts.loader.Peer`) serves the values dl serves: a few of the peer's own samples
against dl's `map` loader's sample of the same global `index`, key by key."""

import itertools

import numpy as np
import torch
import torch.utils.data

from ..contracts.errors import describe
from ..contracts.loader import BatchesItself
from ..host.assembly import build_loader

SAMPLES = 4
"""Peer samples compared per run."""


def peer_values(peer, seed: int) -> dict:
    """Compare `SAMPLES` of `peer`'s samples (map-style: seeded positions; iterable: its first samples;
    `BatchesItself`: its first batch) with dl's
    `map` loader over the same metadata, decoder and config: every key both give as numbers (camera frames as
    values in [0, 1], whether uint8 or float32, channels first or last). Returns `{"values": "equal" | "differ" |
    "not compared", "values_line": one line saying what differs or why, "values_max_abs_diff": {key: max |a - b|}}`;
    it never raises (a peer that fails here is reported, not the run)."""
    try:
        samples = _peer_samples(peer, seed)
        reference = build_loader(peer.meta, "map", peer.decoder, config=peer.config).loader
        diffs: dict[str, float] = {}
        for sample in samples:
            for index, one in _split(sample):
                mine = reference[reference.position_of(index)]
                for key, value in one.items():
                    if key in mine and key != "index":
                        diff = _max_abs_diff(value, mine[key], key in peer.meta.camera_keys)
                        if diff is not None:
                            diffs[key] = max(diffs.get(key, 0.0), diff)
    except Exception as exc:  # noqa: BLE001 - the comparison reports, it never fails a run
        return {"values": "not compared", "values_line": f"values not compared: {describe(exc)}"}
    differing = {k: v for k, v in diffs.items() if v > _tolerance(k, peer)}
    line = (f"values equal to dl's on {len(diffs)} keys" if not differing else
            "values differ from dl's: " + ", ".join(f"{k} max |diff| {v:.3g}" for k, v in sorted(differing.items())))
    return {"values": "differ" if differing else "equal", "values_line": line,
            "values_max_abs_diff": {k: round(v, 6) for k, v in sorted(diffs.items())}}


def _peer_samples(peer, seed: int) -> list[dict]:
    if isinstance(peer, BatchesItself):
        return [next(iter(peer.batches(SAMPLES, 0, seed)))]
    if isinstance(peer, torch.utils.data.IterableDataset):  # its first samples, in its own order
        return list(itertools.islice(iter(peer), SAMPLES))
    positions = np.random.default_rng(seed).choice(len(peer), size=min(SAMPLES, len(peer)), replace=False)
    return [peer[int(i)] for i in positions]


def _split(sample: dict):
    """(index, one sample's values) for an unbatched sample, or for each sample of a batch."""
    index = torch.as_tensor(sample["index"])
    if index.dim() == 0:
        yield int(index), sample
        return
    for b in range(len(index)):
        yield int(index[b]), {k: v[b] for k, v in sample.items()
                        if isinstance(v, torch.Tensor) and v.dim() and len(v) == len(index)}


def _max_abs_diff(theirs, mine, is_camera: bool) -> float | None:
    if not isinstance(theirs, torch.Tensor | np.ndarray) or not isinstance(mine, torch.Tensor):
        return None
    a, b = torch.as_tensor(theirs), mine
    if is_camera:
        a, b = _unit_frames(a, b.shape), _unit_frames(b, b.shape)
    if a.shape != b.shape:
        a = a.reshape(b.shape) if a.numel() == b.numel() else a
    if a.shape != b.shape:
        return float("inf")
    return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0


def _unit_frames(frames: torch.Tensor, channels_first_shape) -> torch.Tensor:
    """Frames as float values in [0, 1], channels first like dl's (a channels-last peer's permuted)."""
    out = frames.double() / 255 if frames.dtype == torch.uint8 else frames.double()
    if out.shape != channels_first_shape and out.dim() >= 3 and out.shape[-1] == channels_first_shape[-3]:
        out = out.movedim(-1, -3)
    return out


def _tolerance(key: str, peer) -> float:
    """Frames: half a uint8 step (the same decoded pixels, whether sent as uint8 or float32); other values: exact
    up to float32 rounding."""
    return 0.5 / 255 if key in peer.meta.camera_keys else 1e-6
