"""Random generators as pure functions of (seed, epoch, purpose, ids), so every order a loader draws is
reproducible in any process, on any platform, in any call order, and a resumed run can replay it."""

import numpy as np

PARTITION, POOL, SHUFFLE, ELASTIC, MIXTURE = 0, 1, 2, 3, 4
"""Purposes: dealing episodes to consumers, a consumer's pool order, a map-style epoch permutation, the
dealing and orders of what is left of an epoch resumed in another shape (`dl.dataloader.elastic`), and which
member of a mixture each of a consumer's samples comes from (`dl.mixture`)."""


def epoch_rng(seed: int, epoch: int, purpose: int, *ids: int) -> np.random.Generator:
    """The generator for one purpose in one epoch, for one consumer when `ids` is given (e.g. rank,
    worker). Seeds must be >= 0."""
    return np.random.default_rng([seed, epoch, purpose, *ids])
