"""The decode ceiling measured where the run decodes: in as many DataLoader workers as the run has, started the way
the run starts them (its plugins' start method and worker init), all decoding at once; or, for a run without
workers, in this process (`dl.bench.ceiling` says why)."""

import torch.utils.data

from ..contracts.decoder import Decoder
from ..contracts.needs import merge_needs
from ..dataloader.build import WorkerInit
from ..format.metadata import DatasetMeta, EpisodeMeta
from .ceiling import TRIALS, CeilingPlan, local_copies, measure_trials, summarize


class _Trials(torch.utils.data.IterableDataset):
    """Yields one process's `measure_trials` (in a DataLoader worker: seeded by its id)."""

    def __init__(self, meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], plan: CeilingPlan):
        self.meta, self.decoder, self.episodes, self.plan = meta, decoder, episodes, plan

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        plan = CeilingPlan(self.plan.trial_s, self.plan.trials, self.plan.seed + (info.id if info else 0))
        yield measure_trials(self.meta, self.decoder, self.episodes, plan)


def decode_ceiling(meta: DatasetMeta, decoder: Decoder, episodes: list[EpisodeMeta], seconds: float,
                   num_workers: int) -> dict | None:
    """The `decode_ceiling` result field: random and sequential camera frames/s of `decoder` on `episodes`, each
    kind the best of `dl.bench.ceiling.TRIALS` trials sharing half of `seconds`, measured in `num_workers`
    DataLoader workers decoding at once (their rates summed per trial), or in this process when `num_workers` is
    0, after the files were read once (a remote source's first episodes downloaded once: `local_copies`). None
    for a dataset without cameras or `seconds` <= 0.

    Raises:
        DlError: the decoder cannot decode the files (as it would in the run).
    """
    if seconds <= 0 or not meta.camera_keys or not episodes:
        return None
    plan = CeilingPlan(trial_s=seconds / 2 / TRIALS)
    with local_copies(meta, episodes) as held:
        trials = _Trials(meta, decoder, held, plan)
        if num_workers == 0:
            found, where = [next(iter(trials))], "this process (the run has no DataLoader workers)"
        else:
            needs = merge_needs({f"decoder {decoder.name}": decoder.dataloader_needs(),
                                 f"source {meta.source.name}": meta.source.dataloader_needs()})
            loader = torch.utils.data.DataLoader(trials, batch_size=None, num_workers=num_workers,
                                                 multiprocessing_context=needs.multiprocessing_context,
                                                 worker_init_fn=WorkerInit(needs.worker_init_fn))
            found = list(loader)
            where = f"{num_workers} DataLoader worker(s) decoding at once, as the run's"
    summed = {kind: [sum(rates) for rates in zip(*(f[kind] for f in found), strict=True)]
              for kind in ("random", "sequential")}
    return summarize(decoder.name, seconds, max(num_workers, 1), summed, where)
