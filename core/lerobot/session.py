"""`dl train`: LeRobot's own `lerobot-train` (its config parser, training loop, checkpoints, logging, evaluation),
with dl's dataset in place of LeRobot's.

LeRobot is used as released. `TrainSession.install` sets three names, in this process only, before lerobot-train
runs:
- `lerobot_train.make_train_eval_datasets`: dl's (`dl.lerobot.datasets`);
- `accelerate.Accelerator`: a subclass whose `prepare_data_loader` hands a streaming dl dataset to dl's own
  DataLoader (`dl.ResumableDataLoader`: each rank reads its own share, disjoint, and its state is a few counters),
  where accelerate would have one rank read for all (`dispatch_batches`) or every rank read everything and keep a
  slice (`IterableDatasetShard`); a map-style one goes to accelerate as LeRobot's does (LeRobot's sampler, sharded
  by accelerate);
- `lerobot_train.save_checkpoint`: LeRobot's, then dl's options and loader state beside it
  (`training_state/dl_train.json`), which `--resume` reads back.
"""

import logging
import sys

from ..contracts.errors import DlError
from ..dataloader.build import build_dataloader
from .datasets import make_train_eval_datasets
from .options import TrainOptions, save_state, saved_state, split_arguments
from .views import LeRobotStreamView, renamed

log = logging.getLogger(__name__)

NEEDS_LEROBOT = ("dl train needs LeRobot 0.6.1 with its training extra, on Python >= 3.12: "
                 "pip install 'dl[lerobot]' (or pip install 'lerobot[dataset,training]==0.6.1' beside dl).")


class RenamedBatches:
    """A DataLoader's batches with their keys renamed (`dl.lerobot.views.renamed`); `loader` is the DataLoader."""

    def __init__(self, loader, rename: dict):
        self.loader, self.rename = loader, rename

    def __iter__(self):
        for batch in self.loader:
            yield renamed(batch, self.rename)


class TrainSession:
    """The state `dl train` keeps beside lerobot-train: the options (`given` on the command line, merged over a
    resumed checkpoint's), the streaming DataLoader it built, and the loader state a resume continues from."""

    def __init__(self, given: dict):
        self.given = given
        self.options = TrainOptions(**given)
        self.stream_loader = None
        self.resume_state: dict | None = None

    def install(self, lerobot_train) -> None:
        """Set dl's seams in `lerobot_train` (the module `lerobot.scripts.lerobot_train`) and in accelerate."""
        import accelerate

        original_save = lerobot_train.save_checkpoint
        lerobot_train.make_train_eval_datasets = self.make_datasets
        accelerate.Accelerator = self.accelerator_class(accelerate.Accelerator)

        def save_checkpoint(checkpoint_dir, *args, **kwargs):
            original_save(checkpoint_dir, *args, **kwargs)
            state = self.stream_loader.state_dict() if self.stream_loader is not None else None
            save_state(checkpoint_dir, self.options, state)

        lerobot_train.save_checkpoint = save_checkpoint

    def make_datasets(self, cfg):
        """lerobot-train's `make_train_eval_datasets(cfg)`: on `--resume`, the checkpoint's dl options (those given
        now win) and its loader state first; a streaming loader sets `cfg.dataset.streaming` (lerobot-train then
        gives it no sampler)."""
        if cfg.resume and cfg.checkpoint_path is not None:
            saved = saved_state(cfg.checkpoint_path)
            if saved:
                self.options = TrainOptions.from_json(saved.get("options", {}), self.given)
                self.resume_state = saved.get("loader_state")
        cfg.dataset.streaming = self.options.streams
        return make_train_eval_datasets(cfg, self.options)

    def accelerator_class(self, base):
        """`base` (accelerate's `Accelerator`) with dl's DataLoader for streaming dl datasets."""
        session = self

        class DlAccelerator(base):
            """accelerate's Accelerator; a DataLoader over a `LeRobotStreamView` becomes dl's (`TrainSession.
            stream_dataloader`), any other is prepared by accelerate."""

            def prepare_data_loader(self, data_loader, device_placement=None, slice_fn_for_dispatch=None):
                if isinstance(data_loader.dataset, LeRobotStreamView):
                    return session.stream_dataloader(data_loader)
                return super().prepare_data_loader(data_loader, device_placement, slice_fn_for_dispatch)

        return DlAccelerator

    def stream_dataloader(self, given) -> RenamedBatches:
        """dl's DataLoader over the stream view of lerobot-train's DataLoader `given`, with its batch size, workers,
        prefetch, persistence, pinning and start method; at a resume, at the saved state (another number of
        processes, workers or batch size: the rest of the epoch exactly once, said in one line)."""
        view = given.dataset
        context = given.multiprocessing_context
        overrides = {"multiprocessing_context": context.get_start_method()} if context is not None else {}
        loader = build_dataloader(view.loader, batch_size=given.batch_size, num_workers=given.num_workers,
                                  prefetch_factor=given.prefetch_factor if given.num_workers else None,
                                  persistent_workers=given.persistent_workers, pin_memory=given.pin_memory,
                                  **overrides)
        if self.resume_state:
            state = self.resume_state
            loader.load_state_dict(state)
            now = view.loader.resume_shape(loader.batch_size, loader.num_workers)
            shape = state.get("shape", now)
            if shape != now:
                log.warning("dl train: the checkpoint's loader ran as %s, this run as %s: serving the rest of epoch "
                            "%d exactly once, then whole epochs.", shape, now, state["epoch"])
            else:
                log.info("dl train: resuming the loader at epoch %d, after %d batches", state["epoch"],
                         state["batches_consumed"])
        self.stream_loader = loader
        return RenamedBatches(loader, view.rename)


def run(argv: list[str]) -> None:
    """Run lerobot-train with `argv` (its own arguments and dl's `--dl.*`, `dl.lerobot.options`) on dl's dataset.

    Raises:
        DlError: LeRobot is not installed (the message names the extra), or a bad `--dl.*` option.
    """
    given, rest = split_arguments(argv)
    TrainOptions(**given)  # bad options fail before LeRobot is imported
    try:
        from lerobot.scripts import lerobot_train
    except ImportError as exc:
        raise DlError(f"{NEEDS_LEROBOT} ({exc})") from None
    session = TrainSession(given)
    session.install(lerobot_train)
    sys.argv = ["lerobot-train", *rest]
    lerobot_train.main()
