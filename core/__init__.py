"""dl: plugin-based dataloading toolkit and benchmark for LeRobot v3.0 robot-learning datasets.

Library use::

    import dl
    dataset = dl.make_dataset("path/to/dataset", episodes=[0, 3], delta_timestamps={"action": [0, 1/30]})
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2)
"""

from importlib.metadata import PackageNotFoundError, version

from .api import make_dataset
from .config import LoaderConfig
from .decoder import DecodedFrames, Decoder
from .errors import DlError
from .hookspecs import hookimpl
from .metadata import DatasetMeta, EpisodeMeta
from .resume import ResumableDataLoader
from .source import Source

try:
    __version__ = version("dl")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"

__all__ = ["DatasetMeta", "DecodedFrames", "Decoder", "DlError", "EpisodeMeta", "LoaderConfig",
           "ResumableDataLoader", "Source", "hookimpl", "make_dataset", "__version__"]
