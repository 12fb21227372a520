"""Where a resumable loader stands in an epoch (`dl.contracts.loader.Resumable.resume_from`): the data types of
exact and elastic resume. How states are saved, merged and turned into positions is `dl.dataloader.elastic`."""

from dataclasses import dataclass

from .errors import ResumeError


@dataclass(frozen=True)
class Segment:
    """A part of an epoch read under one shape.

    Attributes:
        shape: the loader's `resume_shape(batch_size, num_workers)` then (`world_size` and `batch_size` at
            least).
        batches_consumed: per rank of that shape, the batches it had consumed when the segment ended; None:
            that rank had finished its share of the segment.
    """

    shape: dict
    batches_consumed: tuple[int | None, ...]

    def __post_init__(self):
        if len(self.batches_consumed) != self.shape["world_size"]:
            raise ResumeError(f"a resume segment of world size {self.shape['world_size']} lists "
                              f"{len(self.batches_consumed)} ranks' batches: {list(self.batches_consumed)}.")

    def to_dict(self) -> dict:
        """JSON-able."""
        return {"shape": dict(self.shape), "batches_consumed": list(self.batches_consumed)}

    @classmethod
    def from_dict(cls, data: dict) -> "Segment":
        """Inverse of `to_dict`."""
        return cls(dict(data["shape"]), tuple(data["batches_consumed"]))


@dataclass(frozen=True)
class ResumePosition:
    """What a `dl.Resumable` loader needs to continue an epoch (`resume_from`).

    Attributes:
        epoch: the epoch to continue.
        batches: batches this rank consumed in the current segment (skip them); None: all of its share.
        batch_size: the current segment's batch size.
        segments: the ended segments of this epoch, oldest first (empty: the epoch was read in one shape).
    """

    epoch: int
    batches: int | None
    batch_size: int
    segments: tuple[Segment, ...] = ()


def consumer_shape(num_consumers: int) -> dict:
    """The shape of a flat world of `num_consumers` consumers (`dl.contracts.loader.ServesConsumers`): each reads as a
    rank of its own, with one worker and batches of one sample, so a segment's `batches_consumed` are samples."""
    return {"world_size": num_consumers, "num_workers": 1, "batch_size": 1}
