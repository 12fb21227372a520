"""What every peer loader shares: the dl metadata and config it was built for, the local root it reads, and the one
shape of run it supports."""

from importlib.metadata import PackageNotFoundError, version

import torch.utils.data

from dl.contracts.config import LoaderConfig
from dl.contracts.decoder import Decoder
from dl.contracts.errors import PluginError
from dl.contracts.needs import DataLoaderNeeds
from dl.format.metadata import DatasetMeta


class PeerBase:
    """The parts of `dl.contracts.loader.Loader` a peer gives from dl's own metadata: `meta`, `decoder` (unused by
    the peer's reader: dl's benchmark times its decode ceiling with it), `config`, and `episodes` (the selection,
    for the ceiling and the shuffle figures).

    Raises (on construction):
        PluginError: the dataset is not on the local source, or the run has several ranks (peers run single-process
            here: their own distributed modes are not driven by dl's harness).
    """

    name = ""  # the loader's registered name
    distribution = ""  # the peer's distribution, for `library`
    start_method: str | None = None  # its DataLoader workers' start method, as its docs drive it (None: torch's)

    def __init__(self, meta: DatasetMeta, decoder: Decoder, config: LoaderConfig):
        if meta.source.name != "local":
            raise PluginError(f"loader {self.name} reads a local dataset folder: use --source local (the dataset "
                              f"is on {meta.source.name}).")
        if (config.world_size or 1) > 1:
            raise PluginError(f"loader {self.name} runs as one rank here: use --world-size 1.")
        self.meta, self.decoder, self.config = meta, decoder, config
        self.episodes = meta.select(config.episodes)
        self.root = meta.source.root

    @property
    def library(self) -> str:
        try:
            return f"{self.distribution} {version(self.distribution)}"
        except PackageNotFoundError:
            return self.distribution

    @property
    def repo_id(self) -> str:
        """A repo id for readers that want one (the folder's name; nothing is fetched)."""
        return f"local/{self.root.rstrip('/').rsplit('/', 1)[-1]}"

    def dataloader_needs(self) -> DataLoaderNeeds:
        """Its workers' start method (`start_method`) and torch's `default_collate`, as the peer's own training loop
        reads it."""
        from torch.utils.data import default_collate

        return DataLoaderNeeds(multiprocessing_context=self.start_method, collate_fn=default_collate)


class MapPeer(PeerBase, torch.utils.data.Dataset):
    """A map-style peer: its reader's (`reader`, set by the subclass) samples by position, read by a torch DataLoader
    that shuffles them."""

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> dict:
        return self.reader[i]
