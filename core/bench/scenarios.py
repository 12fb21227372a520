"""Named scenarios: presets that set several `RunSpec` fields at once (`dl run --scenario NAME`), cluster
resources included (`resources`: a cluster scheduler's request per run; `--resource KEY=VALUE` overrides
one). Options given explicitly on the command line win over the preset."""

import os

SCENARIOS: dict[str, dict] = {
    "mmap_local": {
        "source": "local", "loader": "map", "decoder": "cpu", "num_workers": 2,
        "resources": {"cpus_per_task": 3, "mem": "4G", "time": 30},
        "_about": "map loader over a local root, memory-mapped Arrow rows, CPU decode, 2 workers",
    },
    "mmap_local_maxworkers": {
        "source": "local", "loader": "map", "decoder": "cpu", "num_workers": os.cpu_count() or 1,
        "_about": "mmap_local with one DataLoader worker per CPU core",
    },
    "stream_local": {
        "source": "local", "loader": "pool", "decoder": "cpu", "num_workers": 2,
        "loader_options": {"episode_pool_size": 32}, "resources": {"cpus_per_task": 3, "mem": "4G", "time": 30},
        "_about": "pool (streaming episode pool) loader over a local root, 32 episodes per consumer, 2 workers",
    },
    "stream_local_2rank": {
        "source": "local", "loader": "pool", "decoder": "cpu", "num_workers": 2, "world_size": 2,
        "loader_options": {"episode_pool_size": 32},
        "resources": {"nodes": 1, "tasks_per_node": 2},
        "_about": "stream_local as two ranks (two processes, torch.distributed gloo on 127.0.0.1): per-rank "
                  "results and a merged line",
    },
    "stream_slurm_2node": {
        "source": "local", "loader": "pool", "decoder": "cpu", "num_workers": 2, "world_size": 2,
        "scheduler": "slurm", "loader_options": {"episode_pool_size": 32},
        "resources": {"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 3, "mem": "4G", "time": 30},
        "_about": "stream_local as two ranks on two SLURM nodes (srun, one task per node, gloo at the first "
                  "node's address): per-rank results, a merged line, ranks' episodes disjoint",
    },
    "stream_bucket": {
        "source": "bucket", "loader": "pool", "decoder": "cpu", "num_workers": 2,
        "loader_options": {"episode_pool_size": 32},
        "_about": "pool loader through the bucket source (prefetch on admit, 2 workers); a local --root (or "
                  "none: the default dataset) is served from a loopback S3 server (moto)",
    },
    "stream_bucket_2node": {
        "source": "bucket", "loader": "pool", "decoder": "cpu", "num_workers": 2, "world_size": 2,
        "loader_options": {"episode_pool_size": 32},
        "_about": "stream_bucket as two ranks (gloo); on a cluster scheduler, one rank per node against a real "
                  "bucket",
    },
    "stream_hub": {
        "source": "hub", "loader": "pool", "decoder": "cpu", "num_workers": 2,
        "loader_options": {"episode_pool_size": 32},
        "_about": "pool loader through the hub source (one pinned commit, prefetch on admit); a local --root (or "
                  "none) is served from dl's loopback Hub API server",
    },
}


def scenario_options(name: str) -> dict:
    """The RunSpec fields a scenario sets.

    Raises:
        KeyError: unknown scenario (the message lists the known ones).
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(sorted(SCENARIOS))}")
    return {k: v for k, v in SCENARIOS[name].items() if not k.startswith("_")}
