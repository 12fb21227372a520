"""`dl transcode`: a LeRobot v3.0 dataset re-encoded into a new folder, one FFmpeg process per video file, several
at once, each file verified as it finishes and kept once verified, so an interrupted run resumes where it stopped.

Order of work, so that the destination never looks complete before it is: the work record (`state`), the data and
meta files copied, the videos re-encoded and verified, `meta/episodes` rewritten with the new timestamps, the new
dataset read back through dl's reader and decoder, and `meta/info.json` last. Until then `meta/info.json` is absent
and no LeRobot reader (dl's included) opens the folder as a dataset.

A depth camera's files (`dl.format.depth`: lossless 12-bit codes) are copied as they are, never re-encoded: any
8-bit or lossy encoding would change the depth every pixel serves.
"""

import concurrent.futures
import dataclasses
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np

from ..contracts.decoder import Decoder
from ..contracts.errors import format_indices
from ..format.episodes import EpisodeColumns
from ..format.metadata import DatasetMeta, EpisodeMeta
from ..host.assembly import build_decoder, open_source
from .ffmpeg import Processes, TranscodeError, check_encoder, encode, frames_of, psnr, tools
from .options import TranscodeOptions
from .state import WORK, State
from .verify import EpisodeRows, new_spans
from .writer import (
    check_result,
    copied_files,
    copy_file,
    new_info,
    row_timestamps,
    stage_video,
    write_episodes,
    write_json,
)

Progress = Callable[[str, float, float | None], None]
"""`progress(phase, done, total)`: "copying" (files), "reading rows" (data files), "encoding" (frames),
"checking" (files)."""

RECORD = "meta/dl_transcode.json"
"""What the new dataset records of how it was made: source, options, versions, and per file its PSNR and frames."""


@dataclasses.dataclass(frozen=True)
class VideoJob:
    """One video file to re-encode: its path (relative to the root), camera key and the episodes it holds."""

    path: str
    key: str
    episodes: tuple[EpisodeMeta, ...]

    @property
    def frames(self) -> int:
        return sum(ep.length for ep in self.episodes)


def video_jobs(meta: DatasetMeta) -> list[VideoJob]:
    """Every video file the episodes use, with the episodes each holds (in file order)."""
    found: dict[str, tuple[str, list]] = {}
    for ep in meta.episodes.values():
        for key, span in ep.videos.items():
            found.setdefault(span.path, (key, []))[1].append(ep)
    return [VideoJob(path, key, tuple(sorted(eps, key=lambda e: e.videos[key].from_timestamp)))
            for path, (key, eps) in found.items()]


def missing_videos(meta: DatasetMeta, jobs: list[VideoJob]) -> list[VideoJob]:
    """The jobs whose original file the source does not have."""
    return [job for job in jobs if job.path not in meta.files]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class Transcoder:
    """One transcode of `meta`'s dataset into `dst` (see the module docstring).

    Args:
        meta: the source dataset's metadata (any source: `dl.host.assembly.open_dataset`).
        dst: the destination folder (missing, empty, or an interrupted transcode of the same source and options).
        options: the encoding and the checks' thresholds.
        jobs: FFmpeg processes at once (None: the cores this process may use); each gets cores // jobs threads.
        allow_missing: transcode what exists when video files are missing, leaving those missing as in the
            source (else refuse, listing them).
        progress: see `Progress`.
        decoder: reads the result back (None: the `cpu` decoder).
    """

    def __init__(self, meta: DatasetMeta, dst: Path, options: TranscodeOptions, *, jobs: int | None = None,
                 allow_missing: bool = False, progress: Progress | None = None, decoder: Decoder | None = None):
        self.meta, self.dst, self.options = meta, Path(dst).absolute(), options
        self.jobs = max(1, jobs or _cores())
        self.allow_missing, self.decoder = allow_missing, decoder
        self.progress = progress or (lambda phase, done, total: None)
        self.processes = Processes()
        self._lock = threading.Lock()
        self.state: State | None = None

    # ------------------------------------------------------------------------------------------ the whole run
    def run(self) -> dict:
        """Do the transcode (or finish an interrupted one); returns the record written to `meta/dl_transcode.json`.

        Raises:
            TranscodeError: a check failed (counts, frame times, PSNR below the threshold, the result not reading
                back), FFmpeg failed, or the destination holds something else; verified files stay for a resume.
            KeyboardInterrupt: Ctrl-C; FFmpeg processes are stopped first, verified files stay for a resume.
        """
        ffmpeg, ffprobe = tools()
        check_encoder(ffmpeg, self.options)
        jobs = video_jobs(self.meta)
        missing = missing_videos(self.meta, jobs)
        if missing and not self.allow_missing:
            shown = "\n  ".join(j.path for j in missing[:20]) + ("\n  ..." if len(missing) > 20 else "")
            episodes = sorted({ep.index for j in missing for ep in j.episodes})
            raise TranscodeError(f"{len(missing)} video file(s) of episode(s) {format_indices(episodes)} are missing "
                                 f"from {self.meta.source.url}:\n  {shown}\nDownload them, or pass --allow-missing to "
                                 "transcode the rest and leave these missing in the new dataset, as in the source.")
        self.state = State.open(self.dst, {"source": self.meta.source.url, **self.options.identity()})
        t0 = time.perf_counter()
        self._copy()
        rows = self._rows()
        todo = [j for j in jobs if j not in missing and self.state.done(j.path) is None]
        self._encode(todo, rows, ffmpeg, ffprobe)
        self._check_psnr([j for j in jobs if j not in missing])
        record = self._finish(jobs, missing, time.perf_counter() - t0)
        return record

    def _copy(self) -> None:
        files = copied_files(self.meta)
        for n, rel in enumerate(files, 1):
            copy_file(self.meta, rel, self.dst)
            self.progress("copying", n, len(files))

    def _rows(self) -> dict:
        """Every episode's row timestamps, read from the copied data files."""
        local = DatasetMeta(open_source(str(self.dst), "local"), self.meta.info, self.meta.columns, self.meta.tasks,
                            self.meta.stats_document, {})
        files = len({ep.data_path for ep in self.meta.episodes.values()})
        done = [0]

        def tick():
            done[0] += 1
            self.progress("reading rows", done[0], files)

        return row_timestamps(local, tick)

    # ------------------------------------------------------------------------------------------ encoding
    def _encode(self, todo: list[VideoJob], rows: dict, ffmpeg: str, ffprobe: str) -> None:
        total = sum(j.frames for j in todo)
        encoded = [0]

        def frames(n: int) -> None:
            with self._lock:
                encoded[0] += n
                self.progress("encoding", min(encoded[0], total), total)

        self.progress("encoding", 0, total)
        if not todo:
            return
        workers = min(self.jobs, len(todo))
        threads = max(1, _cores() // workers)
        pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="dl-transcode")
        futures = [pool.submit(self._one, job, rows, ffmpeg, ffprobe, threads, frames) for job in todo]
        try:
            pending = set(futures)
            while pending:  # short waits: Ctrl-C reaches this thread at once
                finished, pending = concurrent.futures.wait(pending, timeout=0.2,
                                                            return_when=concurrent.futures.FIRST_EXCEPTION)
                for future in finished:
                    future.result()  # the first failure stops the rest (below)
        except BaseException:
            self.processes.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    def _one(self, job: VideoJob, rows: dict, ffmpeg: str, ffprobe: str, threads: int,
             frames: Callable[[int], None]) -> None:
        """Re-encode, verify and keep one file (a thread of the pool; FFmpeg does the work)."""
        work = self.dst / WORK
        original = stage_video(self.meta, job.path, work / "originals")
        new = work / "new" / job.path
        new.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        depth = job.key in self.meta.depth
        if depth:  # lossless 12-bit codes: copied, never re-encoded (an 8-bit encoding would change every depth)
            shutil.copyfile(original, new)
            frames(job.frames)
        else:
            encode(self.processes, ffmpeg, original, str(new), self.options, threads, frames)
        encode_s = time.perf_counter() - t0
        old_frames, new_frames = frames_of(self.processes, ffprobe, original), frames_of(self.processes, ffprobe,
                                                                                          str(new))
        episodes = [EpisodeRows(ep.index, ep.videos[job.key].from_timestamp, rows[ep.index]) for ep in job.episodes]
        spans = new_spans(job.path, old_frames, new_frames, episodes, self.meta.fps, self.options.tolerance_s)
        average, minimum = (math.inf, math.inf) if depth else psnr(self.processes, ffmpeg, str(new), original,
                                                                    self.options.pix_fmt)
        target = self.dst / job.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new, target)
        facts = {"size": target.stat().st_size, "original_size": self.meta.files[job.path],
                 "frames": len(new_frames.pts_s), "gop": new_frames.gop, "psnr_db": _finite(average),
                 "psnr_min_db": _finite(minimum), "encode_s": round(encode_s, 2),
                 "spans": {str(e): list(s) for e, s in spans.items()}}
        with self._lock:
            self.state.record(job.path, facts)
        if not self.meta.source.is_local:
            Path(original).unlink(missing_ok=True)
        if average < self.options.min_psnr_db:  # kept: a re-run with a lower --min-psnr finishes without re-encoding
            raise TranscodeError(_below([(job.path, average)], self.options))

    def _check_psnr(self, jobs: list[VideoJob]) -> None:
        found = [(j.path, self.state.files[j.path]["psnr_db"]) for j in jobs]
        low = [(path, db) for path, db in found if db is not None and db < self.options.min_psnr_db]
        if low:
            raise TranscodeError(_below(low, self.options))

    # ------------------------------------------------------------------------------------------ the rest
    def _finish(self, jobs: list[VideoJob], missing: list[VideoJob], seconds: float) -> dict:
        spans: dict[str, dict[int, tuple[float, float]]] = {}
        for job in jobs:
            if job in missing:
                continue
            for e, (start, end) in self.state.files[job.path]["spans"].items():
                spans.setdefault(job.key, {})[int(e)] = (start, end)
        write_episodes(self.meta, self.dst, spans)
        info = new_info(self.meta, self.options)
        source = open_source(str(self.dst), "local")
        listed: dict[str, int] = {}
        for folder in {"meta", self.meta.info["data_path"].split("/")[0], self.meta.info["video_path"].split("/")[0]}:
            listed.update(source.list_files(folder))
        new_meta = DatasetMeta(source, info, _respanned(self.meta, spans), self.meta.tasks, self.meta.stats_document,
                               listed)
        check_result(new_meta, self.decoder or build_decoder("cpu"), self.options)
        record = {"source": self.meta.source.url, "options": dataclasses.asdict(self.options),
                  "ffmpeg": shutil.which("ffmpeg"), "dl": version("dl"), "seconds": round(seconds, 1),
                  "missing_in_source": [j.path for j in missing], "files": self.state.files}
        write_json(self.dst / RECORD, record)
        write_json(self.dst / "meta" / "info.json", info)
        shutil.rmtree(self.dst / WORK, ignore_errors=True)
        return record


def _respanned(meta: DatasetMeta, spans: dict[str, dict[int, tuple[float, float]]]) -> EpisodeColumns:
    """`meta`'s episode columns with the camera spans `spans` gives (`{camera key: {episode: (from, to)}}`, seconds in
    the new files) in place of the old ones."""
    columns = meta.columns
    arrays = dict(columns.arrays)
    for key, by_episode in spans.items():
        start, end = np.array(columns.from_timestamp[key], dtype=np.float64), np.array(columns.to_timestamp[key],
                                                                                      dtype=np.float64)
        for index, (first, last) in by_episode.items():
            at = columns.position(index)
            start[at], end[at] = first, last
        arrays[f"videos/{key}/from_timestamp"], arrays[f"videos/{key}/to_timestamp"] = start, end
    return EpisodeColumns(arrays, {"data_paths": columns.data_paths, "video_paths": columns.video_paths,
                                   "task_sets": columns.task_sets})


def _finite(db: float) -> float | None:
    """A PSNR for JSON: None where the frames are identical (inf)."""
    return None if math.isinf(db) else round(db, 3)


def _below(low: list[tuple[str, float]], options: TranscodeOptions) -> str:
    shown = ", ".join(f"{path} {db:.2f} dB" for path, db in low[:5]) + (" ..." if len(low) > 5 else "")
    return (f"{len(low)} file(s) fall below --min-psnr {options.min_psnr_db} dB (the average PSNR of the new frames "
            f"against the old): {shown}. Lower --crf for higher quality (in a new destination), or accept the loss "
            "with a lower --min-psnr (the same destination: verified files are kept).")
