"""A run's single-process pass: the loader's steady-state samples/s in the run's own process, no workers, unbatched,
and how that time splits into decode and the rest."""

import itertools

import torch.utils.data

from ..contracts.errors import DlError, describe
from ..contracts.loader import BatchesItself, Peer
from ..dataloader.build import build_dataloader
from .phase import Progress, RunFailed
from .spec import RunSpec
from .steady import SteadyTimer, spread_pct
from .timed_decoder import TimedDecoder


def single_process(dataset, decoder: TimedDecoder, spec: RunSpec, progress: Progress) -> dict:
    """Steady-state samples/s in this process, no workers, unbatched (`dl.bench.steady.SteadyTimer`): after
    `single_proc_warmup_s` of untimed samples (imports, decoder opens, the first reads and page faults are
    start-up costs; at most a quarter of the window), at least `single_proc_s` seconds (at most half the window)
    and `single_proc_samples` samples timed, the rate with the spread of its half-second blocks, and the split of
    the time into decode and the rest. Epochs roll over if the pass outlasts one; afterwards the loader is set to
    the epoch after the pass's first, so every rank starts its window at the same epoch however many epochs its
    timed pass rolled over (ranks deal each epoch's episodes among themselves).

    Raises:
        RunFailed: the loader holds or yields too few samples to time, or fails. DlError: as the loader raises it.
    """
    if isinstance(dataset, BatchesItself):  # a peer's own batches: no single-process pass of dl's kind
        return {"single_proc_samples_per_s": None, "single_proc_skipped": "the loader batches itself"}
    if not isinstance(dataset, torch.utils.data.IterableDataset) and len(dataset) == 0:
        raise RunFailed("the loader holds 0 samples; check --episodes and the dataset.")
    first_epoch = getattr(dataset, "epoch", None)
    try:
        return _timed(dataset, decoder, spec, progress)
    finally:
        if first_epoch is not None and hasattr(dataset, "set_epoch"):
            dataset.set_epoch(first_epoch + 1)


def _timed(dataset, decoder: TimedDecoder, spec: RunSpec, progress: Progress) -> dict:
    warmup_s, seconds = min(spec.single_proc_warmup_s, spec.duration / 4), min(spec.single_proc_s, spec.duration / 2)
    timer = SteadyTimer(warmup_s, seconds, spec.single_proc_samples, limit_s=warmup_s + spec.duration,
                        on_start=lambda: setattr(decoder, "decode_s", 0.0))
    loader = build_dataloader(dataset, batch_size=None, num_workers=0, seed=spec.seed)
    try:
        for epoch in itertools.count():  # epochs roll over if the pass outlasts one
            count = 0
            for _ in loader:
                count += 1
                done = timer.tick()
                progress("single-process", min(timer.measured_s, timer.seconds), timer.seconds)
                if done:
                    break
            else:
                if count == 0:
                    raise RunFailed(f"the loader yielded 0 samples in epoch {epoch} of the single-process pass; "
                                    "check --episodes.")
                continue
            break
    except DlError as exc:
        exc.args = (describe(exc),)
        raise
    except Exception as exc:
        raise RunFailed(f"single-process pass failed after {timer.samples} timed samples: {describe(exc)}") from exc
    if timer.samples < 2:
        raise RunFailed("the loader yielded too few samples in the single-process pass to time; check --episodes.")
    total = timer.measured_s
    decode = min(decoder.decode_s, total)
    rates = timer.block_rates()
    split = ({"fetch_pct": None, "decode_pct": None} if isinstance(dataset, Peer)  # it decodes with its own decoder
             else {"fetch_pct": round(100 * (total - decode) / total, 1), "decode_pct": round(100 * decode / total, 1)})
    return {
        "single_proc_samples_per_s": round(timer.samples / total, 2),
        "single_proc_spread_pct": spread_pct(rates),
        "single_proc_samples": timer.samples,
        "single_proc_s": round(total, 3),
        **split,
    }
