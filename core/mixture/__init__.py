"""dl.mixture: several datasets read as one training stream, each sample drawn from a member by weight.

- `api`: `make_mixture` (`dl.make_mixture`), from loaders or from a spec per member.
- `dataset`: `MixtureDataset`, the IterableDataset `dl.make_dataloader` reads, resumable exactly and elastically.
- `quotas`: the members' weights (by frames, by episodes, or as given) and what each gives an epoch, in which of its
  own epochs; `plan`: an epoch as every consumer's quotas and member order, and the replay of ended segments.
- `schema`: key mapping per member, the features served and their shapes; `stats`: per-member normalization stats
  and their aggregate as LeRobot aggregates them.

A mixture composes loaders through their contracts (`dl.contracts.loader`: `Loader`, `Resumable`, `ServesConsumers`),
so a third party's loader can be a member; members built from specs go through `dl.host`.

May import: `dl.contracts`, `dl.format`, `dl.dataloader`, `dl.host`.
"""
