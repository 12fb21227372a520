"""Where the ranks of a multi-process run meet: a torch.distributed `TCPStore` hosted by the process that
launches them, on a port the operating system picks (port 0) and keeps bound for the whole run.

Choosing a port some other way races: a free port found by binding port 0, closing it and handing the number
to the ranks can be taken by another process before rank 0 binds it, and a port derived from a job id
(`20000 + jobid % 20000`) is the same for jobs 20,000 apart sharing a node. A store bound once, by the
launcher, cannot be taken. The ranks are told through the environment: `MASTER_ADDR`, `MASTER_PORT` and
`TORCHELASTIC_USE_AGENT_STORE=True`, which makes torch.distributed's `env://` rendezvous connect every rank,
rank 0 included, as a client of that store (what torchrun's agent does with the store it hosts)."""

import datetime
from collections.abc import Iterator
from contextlib import contextmanager

AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
"""torch.distributed's switch (`torch.distributed.rendezvous`): every rank is a client of a store its launcher
hosts."""


@contextmanager
def hosted_store(address: str = "127.0.0.1", timeout_s: float = 300.0) -> Iterator[dict[str, str]]:
    """Host a rendezvous store while the body runs (it listens on every interface; `address` is what the ranks
    connect to: this machine as they reach it) and yield the environment the ranks need.

    Yields:
        `{"MASTER_ADDR": address, "MASTER_PORT": the store's port, "TORCHELASTIC_USE_AGENT_STORE": "True"}`.
    """
    import torch.distributed

    store = torch.distributed.TCPStore(address, 0, None, True, datetime.timedelta(seconds=timeout_s),
                                       wait_for_workers=False)
    try:
        yield {"MASTER_ADDR": address, "MASTER_PORT": str(store.port), AGENT_STORE: "True"}
    finally:
        del store
