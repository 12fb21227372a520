"""What a plugin needs of the torch DataLoader that reads it (`dataloader_needs()` of a loader, decoder or
source), and the one merge that refuses contradictions. Plain data: no torch at import."""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import PluginError


@dataclass(frozen=True)
class DataLoaderNeeds:
    """What a plugin needs of the DataLoader; None means "no requirement".

    Attributes:
        multiprocessing_context: the workers' start method ("spawn", "forkserver" or "fork").
        pin_memory: whether batches must (True) or must not (False) be pinned.
        worker_init_fn: called in each worker with its id, as torch's `worker_init_fn`.
        collate_fn: builds a batch from a list of samples.
        sampler: the order of a map-style loader (torch Sampler); a loader that shards and shuffles
            itself gives one, else the DataLoader shuffles with a seeded generator.
    """

    multiprocessing_context: str | None = None
    pin_memory: bool | None = None
    worker_init_fn: Callable | None = None
    collate_fn: Callable | None = None
    sampler: Any = None

    def recorded(self) -> dict:
        """The needs as JSON-able facts for a result file (callables by qualified name)."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = value if isinstance(value, str | bool) else qualified_name(value)
        return out


def qualified_name(obj) -> str:
    named = obj if getattr(obj, "__qualname__", None) else type(obj)
    return f"{named.__module__}.{named.__qualname__}"


NOT_FORK = {"spawn", "forkserver"}
"""Start methods that do not fork the process building the loader: a plugin that needs `forkserver` (to start
workers cheaply without inheriting its threads) takes `spawn` where another plugin needs it."""


def merge_needs(needs: dict[str, DataLoaderNeeds]) -> DataLoaderNeeds:
    """Combine the needs of several plugins (`{"loader pool": needs, ...}`, the key names the plugin); `spawn` and
    `forkserver` combine to `spawn` (`NOT_FORK`).

    Raises:
        PluginError: two plugins need different values of one field; the message names both.
    """
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for who, need in needs.items():
        for field in dataclasses.fields(need):
            value = getattr(need, field.name)
            if value is None:
                continue
            if field.name == "multiprocessing_context" and {merged.get(field.name), value} == NOT_FORK:
                value = "spawn"  # neither forks the process that builds the loader: spawn satisfies both
            elif field.name in merged and merged[field.name] is not value and merged[field.name] != value:
                raise PluginError(f"{owner[field.name]} needs DataLoader {field.name}={merged[field.name]!r} but "
                                  f"{who} needs {value!r}; these plugins cannot be used together.")
            merged[field.name], owner[field.name] = value, who
    return DataLoaderNeeds(**merged)
