"""Shuffle quality, as LeRobot's streaming benchmark measures it: distinct episodes per batch, and the
best a loader can expect for a set of episodes. Pure functions; loaders report their own ceiling with it."""

import numpy as np


def distinct_episode_fraction(episode_index: np.ndarray) -> float:
    """Shuffle randomness of one batch: distinct episodes in it / batch size (1.0: all from different
    episodes)."""
    return len(np.unique(episode_index)) / len(episode_index)


def ideal_distinct_fraction(lengths, batch_size: int) -> float:
    """The expected `distinct_episode_fraction` when every sample of a batch is drawn independently and
    uniformly over all frames (`lengths`: frames per episode, a list or an array): sum over episodes of
    P(episode appears) / batch size. A loader's shuffle cannot beat this on average; a map loader with a full
    shuffle gets close to it."""
    frames = np.asarray(lengths, dtype=np.float64)
    p = frames / frames.sum()
    return float((1 - (1 - p) ** batch_size).sum() / batch_size)
