"""dl.dataloader: the torch DataLoader machinery dl builds around a loader, and the orders loaders draw.

- `build`: `build_dataloader`, from what the loader, decoder and source need (`dl.contracts.needs`);
  `dataloaders`: the DataLoader classes it returns (`DlDataLoader`, `ResumableDataLoader`).
- `frames`, `frame_buffers`, `inline_tensors`: a batch across the worker boundary (camera frames stacked
  into reused shared memory, small tensors inside the pickled batch, float32 converted while stacking).
  `private_torch`: the private torch APIs these rely on, each with its announced fallback.
- `resume`, `elastic`: exact and elastic mid-epoch resume from counters; `shared_counters`: counters in
  shared memory, read across DataLoader workers.
- `world`: ranks, world size and workers resolved in one place; `rendezvous`: the store where a launcher's
  ranks meet, on a port it holds; `seeding`: every generator a pure function of (seed, epoch, purpose, ids);
  `shuffle`: shuffle quality and its ceiling.

May import: `dl.contracts`.
"""
