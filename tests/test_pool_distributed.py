"""A real two-process torch.distributed (gloo, loopback) run of the `pool` loader: each rank builds the
dataset without rank/world_size options, so it must learn them from the initialized process group; the
ranks' samples over one epoch (2 DataLoader workers each) must be disjoint and together complete."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from dl.dataloader.rendezvous import hosted_store
from dl.format.metadata import DatasetMeta
from dl.plugins.local_source import local_source

WORLD_SIZE = 2
TIMEOUT_S = 120
TABULAR = dict(episodes=7, frames_per_episode=(5, 15), cameras=0, episodes_per_file=3)

RANK_SCRIPT = r"""
import json, os, sys
from datetime import timedelta

import torch.distributed as dist
import torch.utils.data

import dl

root, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # env://: MASTER_ADDR/PORT, RANK, WORLD_SIZE
rank, world_size = dist.get_rank(), dist.get_world_size()
# from here on only the process group can tell the loader who it is (not the launcher's environment)
del os.environ["RANK"], os.environ["WORLD_SIZE"]
try:
    ds = dl.make_dataset(root, loader="pool", seed=11, loader_options={"episode_pool_size": 2})
    loader = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=2)
    mine = [i for batch in loader for i in batch["index"].tolist()]
    gathered = [None] * world_size
    dist.all_gather_object(gathered, mine)
    with open(out, "w") as f:
        json.dump({"rank": rank, "loader_rank": ds.rank, "loader_world_size": ds.world_size, "mine": mine,
                   "gathered": gathered}, f)
finally:
    dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_gloo_ranks_split_an_epoch_exactly(dataset_factory, tmp_path):
    root = dataset_factory(**TABULAR)
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    procs, logs = [], []
    rendezvous = contextlib.ExitStack()
    try:
        meet = rendezvous.enter_context(hosted_store())  # a store this process holds: no port to race for
        for rank in range(WORLD_SIZE):
            env = {**os.environ, **meet, "RANK": str(rank), "WORLD_SIZE": str(WORLD_SIZE), "GLOO_SOCKET_IFNAME": "lo",
                   "OMP_NUM_THREADS": "1"}
            log = open(tmp_path / f"rank{rank}.log", "w+b")  # closed in finally
            logs.append(log)
            procs.append(subprocess.Popen([sys.executable, str(script), str(root), str(tmp_path / f"rank{rank}.json")],
                                          env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + TIMEOUT_S
        # wait for both; stop early when one fails (its peer would otherwise block until the gloo timeout)
        while any(p.poll() is None for p in procs) and not any(p.poll() for p in procs):
            if time.monotonic() > deadline:
                pytest.fail(f"the rank processes did not finish within {TIMEOUT_S} s")
            time.sleep(0.05)
        if any(p.poll() != 0 for p in procs):
            report = []
            for rank, (proc, log) in enumerate(zip(procs, logs, strict=True)):
                log.seek(0)
                state = "still running" if proc.poll() is None else f"exit {proc.poll()}"
                report.append(f"rank {rank} ({state}):\n{log.read().decode()[-3000:]}")
            pytest.fail("\n".join(report))
    finally:
        for proc in procs:  # kill each rank's whole session (it and its DataLoader workers) if still running
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        for log in logs:
            log.close()
        rendezvous.close()

    results = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    for rank, result in enumerate(results):
        assert (result["rank"], result["loader_rank"], result["loader_world_size"]) == (rank, rank, WORLD_SIZE)
        assert result["gathered"] == [r["mine"] for r in results]  # all_gather_object agrees with each rank
    per_rank = [r["mine"] for r in results]
    assert all(per_rank)
    assert not set(per_rank[0]) & set(per_rank[1])
    meta = DatasetMeta.load(local_source(str(root)))
    every = [i for ep in meta.select(None) for i in range(ep.dataset_from_index, ep.dataset_to_index)]
    assert Counter(per_rank[0] + per_rank[1]) == Counter(every)
