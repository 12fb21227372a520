"""Named scenarios: presets that set several `RunSpec` fields at once (`dl run --scenario NAME`).
Options given explicitly on the command line win over the preset."""

import os

SCENARIOS: dict[str, dict] = {
    "mmap_local": {
        "source": "local", "loader": "map", "decoder": "cpu", "num_workers": 2,
        "_about": "map loader over a local root, memory-mapped Arrow rows, CPU decode, 2 workers",
    },
    "mmap_local_maxworkers": {
        "source": "local", "loader": "map", "decoder": "cpu", "num_workers": os.cpu_count() or 1,
        "_about": "mmap_local with one DataLoader worker per CPU core",
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
