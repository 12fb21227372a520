"""Which bytes of a remote file its spans need, from its index read once per run with a few ranged reads: an MP4's
container index (`dl.kits.video_indexes`) or a parquet footer. A `FilePlan` is what every reader of the file reads
(`header`), a `check` (the sha1 of the index bytes when planned: a reader that fetches them again notices a file
that changed since) and, for a parquet file, its row groups' byte ranges and `episode_index` bounds. All spans of one
file are planned at once, with arrays: `video_ranges` maps time spans to the byte ranges of their frames from the
keyframe at or before the first, `frame_ranges` a read of some frames to the exact bytes its decode needs, and
`rows_ranges` episodes to the row groups whose `episode_index` statistics admit them.
"""

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...contracts.errors import DlError
from ..mp4_index import SampleIndex, merge_ranges

Read = Callable[[int, int], bytes]
TAIL_BYTES = 64 << 10
"""The last bytes of a parquet file read first: its footer's length and, usually, the footer (as pyarrow reads)."""


@dataclass(frozen=True)
class FilePlan:
    """What every reader of one file reads: `size` (bytes, when planned), `header` (`[start, end)` ranges: container
    index and first samples, or parquet footer), `check` (`(start, end, sha1 hex)` of the index bytes) and, for a
    parquet file, `groups`: one `(first episode, last episode, start, end)` per row group (its `episode_index`
    statistics, or the whole int64 range without them; its bytes)."""

    size: int
    header: tuple[tuple[int, int], ...]
    check: tuple[int, int, str]
    groups: tuple[tuple[int, int, int, int], ...] = ()


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def plan_video(index: SampleIndex, read: Read) -> FilePlan:
    """The plan of an MP4 from its index (`dl.kits.video_indexes`), its `moov` bytes read through `read` for the
    check."""
    return FilePlan(index.size, index.header, (*index.moov, digest(read(*index.moov))))


def video_ranges(index: SampleIndex, from_s: np.ndarray, to_s: np.ndarray) -> tuple[list, int, np.ndarray]:
    """The bytes of the frames shown in the spans `[from_s[i], to_s[i])` seconds (float64 [S]), with the decoder's
    read-ahead: `(merged [start, end) ranges, the bytes the shown frames occupy, empty)`, `empty` bool [S] marking
    the spans that show no frame (left out of both)."""
    first, last, lo, hi, empty = index.decode_spans(from_s, to_s)
    kept = ~empty
    ranges = index.byte_ranges(first[kept], last[kept]) if kept.any() else []
    return ranges, int(index.bytes_of(lo[kept], hi[kept]).sum()), empty


def frame_ranges(index: SampleIndex, first: int, last: int) -> list[tuple[int, int]]:
    """The bytes a decode of the frames at positions `first..last` of the file's presentation order reads: its samples
    from the keyframe it starts at (`SampleIndex.frame_samples`), merged, without read-ahead."""
    return index.byte_ranges(*index.frame_samples(first, last), read_ahead=False)


class ParquetPlanError(DlError):
    """A parquet file's footer cannot be read; the message names the file."""


def plan_parquet(read: Read, size: int, name: str) -> FilePlan:
    """Read a parquet file's footer: its plan, with its row groups.
    Raises ParquetPlanError: no parquet magic, or a footer pyarrow cannot parse."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if size < 12:
        raise ParquetPlanError(f"{name} ({size} bytes) is too small to be a parquet file")
    tail_start = max(0, size - TAIL_BYTES)
    tail = read(tail_start, size)
    if len(tail) != size - tail_start or tail[-4:] != b"PAR1":
        raise ParquetPlanError(f"{name} does not end with the parquet magic (truncated, or not parquet)")
    (length,) = struct.unpack("<I", tail[-8:-4])
    start = size - 8 - length
    if start < 4:
        raise ParquetPlanError(f"{name}: footer length {length} does not fit the file's {size} bytes")
    if start < tail_start:
        tail_start, tail = start, read(start, size)
    footer = tail[start - tail_start:]
    try:
        metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + footer))  # the footer alone, as a parquet file
    except (pa.ArrowException, OSError) as exc:
        raise ParquetPlanError(f"{name}: unreadable parquet footer ({exc})") from None
    # pyarrow opens a file by reading its last 64 KiB (at least the footer): every reader reads those
    return FilePlan(size, ((min(start, max(0, size - TAIL_BYTES)), size),), (start, size, digest(footer)),
                    tuple(_row_group(metadata.row_group(g)) for g in range(metadata.num_row_groups)))


def _row_group(group) -> tuple[int, int, int, int]:
    columns = [group.column(i) for i in range(group.num_columns)]
    stats = next((c.statistics for c in columns if c.path_in_schema == "episode_index"), None)
    lo, hi = (int(stats.min), int(stats.max)) if stats is not None and stats.has_min_max else (-2**63, 2**63 - 1)
    starts = [c.dictionary_page_offset if c.has_dictionary_page and c.dictionary_page_offset else
              c.data_page_offset for c in columns]
    return lo, hi, min(starts), max(s + c.total_compressed_size for s, c in zip(starts, columns, strict=True))


def rows_ranges(plan: FilePlan, episodes: np.ndarray) -> tuple[list, int]:
    """The row groups of a parquet file whose `episode_index` statistics admit any of `episodes` (int64 [E]; all
    groups when they have no statistics), as merged byte ranges, and the bytes the episodes' rows use: each admitting
    group's bytes times the episode's share of its rows (from the statistics: an episode alone in its row groups
    needs them whole)."""
    if not plan.groups:
        return [], 0
    groups = np.array(plan.groups, dtype=np.int64)
    lo, hi, start, end = groups.T
    episodes = np.sort(np.asarray(episodes, dtype=np.int64))
    admitted = np.searchsorted(episodes, hi, side="right") - np.searchsorted(episodes, lo, side="left")
    bounded = lo > np.iinfo(np.int64).min  # without statistics a group's share is its whole
    share = (end - start) / np.where(bounded, hi - lo + 1, 1)
    taken = admitted > 0
    return merge_ranges(groups[taken][:, 2:]), int((admitted * share).sum())
