"""Which bytes of a remote file a part of it needs, from its index read once per run with a few ranged reads: an
MP4's container index (`dl.kits.video_indexes`) or a parquet footer. A `FilePlan` is what every reader of the file reads
(`header`) and a `check` (the sha1 of the index bytes when planned: a reader that fetches them again notices a file
that changed since). `video_part` maps a time span to the byte ranges of its frames from the keyframe at or before
the first; `rows_part` maps an episode to the row groups whose `episode_index` statistics admit it.
"""

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from ...contracts.errors import DlError
from ..mp4_index import SampleIndex, merge_ranges
from .span_reads import keyframe_marks

Read = Callable[[int, int], bytes]
TAIL_BYTES = 64 << 10
"""The last bytes of a parquet file read first: its footer's length and, usually, the footer (as pyarrow reads)."""


@dataclass(frozen=True)
class FilePlan:
    """What every reader of one file reads: `size` (bytes, when planned), `header` (`[start, end)` ranges: container
    index and first samples, or parquet footer) and `check` (`(start, end, sha1 hex)` of the index bytes)."""

    size: int
    header: tuple[tuple[int, int], ...]
    check: tuple[int, int, str]


@dataclass(frozen=True)
class Part:
    """The bytes one span of a file needs: `ranges` to fetch (`[start, end)`, merged), `needed` (the bytes its frames
    or rows occupy, for read amplification) and, for a video span, `marks` (where its keyframes lie:
    `dl.kits.remote.span_reads.keyframe_marks`; b"": reads placed by proportion)."""

    ranges: tuple[tuple[int, int], ...]
    needed: int
    marks: bytes = b""


def digest(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def plan_video(index: SampleIndex, read: Read) -> FilePlan:
    """The plan of an MP4 from its index (`dl.kits.video_indexes`), its `moov` bytes read through `read` for the
    check."""
    return FilePlan(index.size, index.header, (*index.moov, digest(read(*index.moov))))


def video_part(index: SampleIndex, from_s: float, to_s: float) -> Part:
    """The bytes of the frames shown in `[from_s, to_s)` seconds."""
    first, last, shown_first, shown_last = index.decode_span(from_s, to_s)
    ranges = tuple(index.byte_ranges(first, last))
    return Part(ranges, index.bytes_of(shown_first, shown_last), keyframe_marks(index, first, last, ranges, from_s))


class ParquetPlanError(DlError):
    """A parquet file's footer cannot be read; the message names the file."""


def plan_parquet(read: Read, size: int, name: str):
    """Read a parquet file's footer: `(FilePlan, pyarrow FileMetaData)`.
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
    return FilePlan(size, ((min(start, max(0, size - TAIL_BYTES)), size),), (start, size, digest(footer))), metadata


def rows_part(metadata, episode: int) -> Part:
    """The row groups of a parquet file whose `episode_index` statistics admit `episode` (all when it has no
    statistics), as merged byte ranges; `needed`: their bytes times the episode's share of their rows (from
    the statistics: an episode alone in its row groups needs them whole)."""
    ranges, needed = [], 0.0
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        columns = [group.column(i) for i in range(group.num_columns)]
        stats = next((c.statistics for c in columns if c.path_in_schema == "episode_index"), None)
        if stats is not None and stats.has_min_max and not stats.min <= episode <= stats.max:
            continue
        starts = [c.dictionary_page_offset if c.has_dictionary_page and c.dictionary_page_offset else
                  c.data_page_offset for c in columns]
        start, end = min(starts), max(s + c.total_compressed_size for s, c in zip(starts, columns, strict=True))
        ranges.append((start, end))
        span = (stats.max - stats.min + 1) if stats is not None and stats.has_min_max else 1
        needed += (end - start) / span
    return Part(tuple(merge_ranges(ranges)), int(needed))
