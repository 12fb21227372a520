"""What a remote source knows of its files' insides (each indexed file's `FilePlan`, files read whole and why), built
once by `prepare` on the host and carried to other processes by `state` / `restore`; the byte ranges of spans are
computed from them where they are read (`pieces`, `ranked`: a file's spans at once, with arrays), never held per
episode."""

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from ...contracts.source import FileSpan
from ..mp4_index import merge_ranges
from ..video_indexes import VideoIndexes
from .file_plan import FilePlan, ParquetPlanError, frame_ranges, plan_parquet, plan_video, rows_ranges, video_ranges
from .prefetch import Piece, Ranked

log = logging.getLogger(__name__)

INDEX_THREADS = 16
"""Files indexed at once by `prepare` (each costs one or two round trips)."""


def _kind(span: FileSpan) -> str | None:
    """How a span narrows its file: "video" (a time span), "rows" (a data file's rows of one episode), None (its
    byte range as given)."""
    if span.from_timestamp is not None and span.to_timestamp is not None:
        return "video"
    return "rows" if span.episode is not None else None


class FilePlans:
    """Indexed files (`files`: their `FilePlan`; a video's sample index is the source's, `dl.kits.video_indexes`)
    and files read whole (`whole`: why)."""

    def __init__(self):
        self.files: dict[str, FilePlan] = {}
        self.whole: dict[str, str] = {}

    def prepare(self, spans: list[FileSpan], size_of: Callable[[str], int], read: Callable[[str, int, int], bytes],
                url: str, videos: VideoIndexes) -> int:
        """Index the files of `spans` not indexed yet (`INDEX_THREADS` at once, through `read(rel, start, end)`: a
        video's index from `videos`, the source's, parsed there unless held; a file that cannot be indexed is read
        whole, logged at INFO) and return the bytes the spans need (each file's index once plus the union of its
        spans' ranges). `url` names the dataset."""
        todo = {s.path: s for s in spans if _kind(s) and s.path not in self.files and s.path not in self.whole}
        if todo:
            def index(span: FileSpan) -> FilePlan | str:
                where = f"{url}/{span.path}"
                size = span.size if span.size is not None else size_of(span.path)
                file_read = partial(read, span.path)
                if span.episode is None:
                    found = videos.get(span.path, size, file_read, where)
                    return videos.unindexed[span.path] if found is None else plan_video(found, file_read)
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
                        self.files[rel] = found
        pieces, _ = self.pieces(spans, size_of, videos, url)
        return sum(b - a for a, b in merge_ranges([(p.start, p.end) for p in pieces]))

    def pieces(self, spans: list[FileSpan], size_of: Callable[[str], int], videos: VideoIndexes,
               url: str = "") -> tuple[list[Piece], int]:
        """The byte ranges `spans` need (each planned file's index bytes with them, every file's ranges merged) and
        the bytes their frames or rows use (a span of a file not planned: its range, times its share). A video span
        that shows no frame is read whole (logged at INFO, naming `url`); the decoder says more."""
        by_file: dict[str, list[FileSpan]] = {}
        for span in spans:
            by_file.setdefault(span.path, []).append(span)
        out, needed = [], 0
        for rel, mine in by_file.items():
            plan, kind = self.files.get(rel), _kind(mine[0])
            index = videos.found.get(rel) if kind == "video" else None
            ranges, whole = [], []
            if plan is not None and index is not None:
                from_s = np.array([s.from_timestamp for s in mine], dtype=np.float64)
                to_s = np.array([s.to_timestamp for s in mine], dtype=np.float64)
                ranges, used, empty = video_ranges(index, from_s, to_s)
                needed += used
                whole = [s for s, none in zip(mine, empty, strict=True) if none]
                for span in whole:
                    log.info("%s/%s: no frame in [%.3f, %.3f) s; read whole", url, rel, span.from_timestamp,
                             span.to_timestamp)
            elif plan is not None and kind == "rows" and plan.groups:
                ranges, used = rows_ranges(plan, np.array([s.episode for s in mine], dtype=np.int64))
                needed += used
            else:
                whole = mine
            if ranges:
                out += [Piece(rel, a, b) for a, b in merge_ranges([*plan.header, *ranges])]
            for span in whole:
                size = span.size if span.size is not None else size_of(rel)
                start, end = span.start or 0, size if span.end is None else span.end
                out.append(Piece(rel, start, end))
                needed += int((end - start) * span.share)
        return out, needed

    def ranked(self, span: FileSpan, size_of: Callable[[str], int], videos: VideoIndexes) -> list[Ranked]:
        """In which order `span`'s bytes are read: each of a video span's `reads` (frames of the file, `FileSpan`)
        as the exact bytes its decode needs, at its rank, with the file's index at rank 0; every other span's bytes
        (`pieces`) at rank 0."""
        index = videos.found.get(span.path)
        plan = self.files.get(span.path)
        if not span.reads or index is None or plan is None or _kind(span) != "video":
            return [Ranked(*p, 0) for p in self.pieces([span], size_of, videos)[0]]
        return [Ranked(span.path, a, b, 0) for a, b in plan.header] + [
            Ranked(span.path, a, b, int(rank)) for first, last, rank in span.reads
            for a, b in frame_ranges(index, int(first), int(last))]

    def state(self) -> dict:
        """JSON-ready: `plans` and `whole`."""
        return {"plans": {rel: [plan.size, plan.header, plan.check, plan.groups] for rel, plan in self.files.items()},
                "whole": dict(self.whole)}

    def restore(self, state: dict) -> None:
        """Add what `state()` returned in another process."""
        self.files.update({rel: FilePlan(int(size), tuple((int(a), int(b)) for a, b in header), tuple(check),
                                         tuple(tuple(int(x) for x in g) for g in groups))
                           for rel, (size, header, check, groups) in state.get("plans", {}).items()})
        self.whole.update(state.get("whole", {}))
