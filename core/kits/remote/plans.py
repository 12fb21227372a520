"""What a remote source knows of its files' insides (indexed files, each admitted span's byte ranges, files read
whole and why), built once by `prepare` on the host and carried to other processes by `state` / `restore`."""

import base64
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from ...contracts.source import FileSpan
from ..mp4_index import Mp4IndexError, merge_ranges
from ..video_indexes import VideoIndexes
from .file_plan import FilePlan, ParquetPlanError, Part, plan_parquet, plan_video, rows_part, video_part
from .prefetch import Piece
from .span_reads import Ranked, ranked_reads

log = logging.getLogger(__name__)

INDEX_THREADS = 16
"""Files indexed at once by `prepare` (each costs one or two round trips)."""


def part_key(span: FileSpan) -> tuple | None:
    """How a span's byte ranges are keyed: (path, from, to) of a video span, (path, episode) of a data file's
    rows; None for a span that says nothing of the file's content."""
    if span.from_timestamp is not None and span.to_timestamp is not None:
        return span.path, float(span.from_timestamp), float(span.to_timestamp)
    if span.episode is not None:
        return span.path, int(span.episode)
    return None


class FilePlans:
    """Indexed files (`files`: their `FilePlan`), the byte ranges of spans (`parts`), files read whole
    (`whole`: why)."""

    def __init__(self):
        self.files: dict[str, FilePlan] = {}
        self.parts: dict[tuple, Part] = {}
        self.whole: dict[str, str] = {}

    def prepare(self, spans: list[FileSpan], size_of: Callable[[str], int], read: Callable[[str, int, int], bytes],
                url: str, videos: VideoIndexes) -> int:
        """Index the files of `spans` not indexed yet (`INDEX_THREADS` at once, through `read(rel, start, end)`: a
        video's index from `videos`, the source's, parsed there unless held; a file that cannot be indexed is read
        whole, logged at INFO), compute every span's ranges, and return the bytes the spans need (each file's index
        once plus the union of its spans' ranges). `url` names the dataset."""
        todo = {s.path: s for s in spans
                if part_key(s) is not None and s.path not in self.files and s.path not in self.whole}
        indexes = {}
        if todo:
            def index(span: FileSpan):
                where = f"{url}/{span.path}"
                size = span.size if span.size is not None else size_of(span.path)
                file_read = partial(read, span.path)
                if span.episode is None:
                    found = videos.get(span.path, size, file_read, where)
                    return videos.unindexed[span.path] if found is None else (plan_video(found, file_read), found)
                try:
                    return plan_parquet(file_read, size, where)
                except ParquetPlanError as exc:
                    return str(exc)

            with ThreadPoolExecutor(min(INDEX_THREADS, len(todo)), thread_name_prefix="dl-index") as pool:
                for rel, found in zip(todo, pool.map(index, todo.values()), strict=True):
                    if isinstance(found, str):
                        self.whole[rel] = found
                        log.info("%s/%s is read whole: %s", url, rel, found)
                    else:
                        self.files[rel], indexes[rel] = found
        for span in spans:
            key = part_key(span)
            if key is None or key in self.parts or span.path not in indexes:
                continue
            try:
                self.parts[key] = (video_part(indexes[span.path], span.from_timestamp, span.to_timestamp)
                                   if span.episode is None else rows_part(indexes[span.path], span.episode))
            except Mp4IndexError as exc:  # no frame in the span: read the file whole; the decoder says more
                log.info("%s/%s: %s; read whole", url, span.path, exc)
        by_file: dict[str, list[tuple[int, int]]] = {}
        for span in spans:
            by_file.setdefault(span.path, []).extend((p.start, p.end) for p in self.pieces(span, size_of)[0])
        return sum(b - a for ranges in by_file.values() for a, b in merge_ranges(ranges))

    def pieces(self, span: FileSpan, size_of: Callable[[str], int]) -> tuple[list[Piece], int]:
        """The byte ranges `span` needs (with its file's index bytes) and the bytes its frames or rows use (the
        whole span times its share when the file is not indexed)."""
        key = part_key(span)
        part = self.parts.get(key) if key is not None else None
        if part is not None:
            return [Piece(span.path, a, b) for a, b in self.files[span.path].header + part.ranges], part.needed
        size = span.size if span.size is not None else size_of(span.path)
        start, end = span.start or 0, size if span.end is None else span.end
        return [Piece(span.path, start, end)], int((end - start) * span.share)

    def ranked(self, span: FileSpan, pieces: list[Piece]) -> list[Ranked]:
        """In which order `span`'s `pieces` (from `pieces`) are read: a video span's `reads` placed in its frames'
        bytes (`dl.kits.remote.span_reads`), everything else (a file's index, an episode's rows, a span without
        reads or not indexed) at rank 0."""
        key = part_key(span)
        part = self.parts.get(key) if key is not None else None
        if not span.reads or part is None or span.episode is not None:
            return [Ranked(p.rel, p.start, p.end, 0) for p in pieces]
        header = [Ranked(span.path, a, b, 0) for a, b in self.files[span.path].header]
        return header + ranked_reads(span.path, part.ranges, span.from_timestamp, span.to_timestamp, span.reads,
                                     part.marks)

    def state(self) -> dict:
        """JSON-ready: `plans`, `parts`, `whole`."""
        return {"plans": {rel: [plan.size, plan.header, plan.check] for rel, plan in self.files.items()},
                "parts": [[*key, [list(r) for r in part.ranges], part.needed, base64.b64encode(part.marks).decode()]
                          for key, part in self.parts.items()],
                "whole": dict(self.whole)}

    def restore(self, state: dict) -> None:
        """Add what `state()` returned in another process."""
        self.files.update({rel: FilePlan(int(size), tuple((int(a), int(b)) for a, b in header), tuple(check))
                           for rel, (size, header, check) in state.get("plans", {}).items()})
        for *key, ranges, needed, marks in state.get("parts", []):
            self.parts[tuple(key)] = Part(tuple((int(a), int(b)) for a, b in ranges), int(needed),
                                          base64.b64decode(marks))
        self.whole.update(state.get("whole", {}))
