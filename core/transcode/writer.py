"""Everything of a transcoded dataset but the video encoding: data and meta files copied from the source,
`meta/episodes` rewritten with the new files' timestamps (every other column kept), `info.json` with the new codec,
and the result read back through dl's own metadata reader and decoder before `info.json` makes it look complete."""

import copy
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts.decoder import Decoder, codec_matches
from ..contracts.errors import DlError, describe
from ..format.episode_checks import describe_problems
from ..format.metadata import DatasetMeta
from ..format.tabular import read_episode_tables
from ..format.timestamp_checks import span_ends
from .ffmpeg import TranscodeError
from .options import TranscodeOptions

EPISODES = "meta/episodes/"


def copied_files(meta: DatasetMeta) -> list[str]:
    """The files copied as they are: every listed file under `meta/` but `info.json` and the episodes parquet
    files (rewritten), and every file under the data folder (`data_path`'s top folder)."""
    data_top = meta.info["data_path"].split("/")[0] + "/"
    return [rel for rel in meta.files if rel.startswith(data_top) or (
        rel.startswith("meta/") and rel != "meta/info.json" and not (rel.startswith(EPISODES) and rel.endswith(
            ".parquet")))]


def copy_file(meta: DatasetMeta, rel: str, dst: Path) -> int:
    """Copy `rel` from the source to `dst/rel` (through a temporary name), unless a copy of its listed size is
    there already; returns the bytes copied."""
    target = dst / rel
    size = meta.files.get(rel)
    if target.is_file() and size is not None and target.stat().st_size == size:
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.partial")
    with meta.source.open(rel) as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 22)
    os.replace(tmp, target)
    return target.stat().st_size


def stage_video(meta: DatasetMeta, rel: str, work: Path) -> str:
    """A local path FFmpeg can read `rel` at: the file itself on a local source, else a copy under `work`."""
    if meta.source.is_local:
        return meta.source.path(rel)
    copy_file(meta, rel, work)
    return str(work / rel)


def row_timestamps(meta: DatasetMeta, on_file: Callable[[], None] | None = None) -> dict[int, np.ndarray]:
    """Every episode's `timestamp` column (float64, seconds from its start), read per data file with dl's reader
    (which checks `frame_index` and timestamps against fps on the way)."""
    by_file: dict[str, list] = {}
    for ep in meta.episodes.values():
        by_file.setdefault(ep.data_path, []).append(ep)
    out = {}
    for episodes in by_file.values():
        for index, table in read_episode_tables(meta, episodes, ["frame_index", "timestamp"]).items():
            out[index] = table.column("timestamp").to_numpy().astype(np.float64)
        if on_file is not None:
            on_file()
    return out


def new_info(meta: DatasetMeta, options: TranscodeOptions) -> dict:
    """info.json with each camera's `video.codec`, `video.pix_fmt` and `video.g` (the GOP) set to the new
    encoding (depth cameras, copied, keep theirs); everything else as it was."""
    info = copy.deepcopy(meta.info)
    for key in meta.video_keys:
        if key in meta.depth:  # copied as it is (`dl.transcode.run`): its info stays true
            continue
        feature = info["features"][key]
        holder = "info" if "info" in feature or "video_info" not in feature else "video_info"
        video = feature.setdefault(holder, {})
        video.update({"video.codec": options.codec, "video.pix_fmt": options.pix_fmt, "video.g": options.gop})
    return info


def write_episodes(meta: DatasetMeta, dst: Path, spans: dict[str, dict[int, tuple[float, float]]]) -> None:
    """Rewrite each `meta/episodes` parquet file into `dst` with the new `videos/{key}/from_timestamp` and
    `to_timestamp` of every episode in `spans` (`{camera key: {episode: (from, to)}}`); every other column, the
    schema and the row order kept."""
    for rel in (f for f in meta.files if f.startswith(EPISODES) and f.endswith(".parquet")):
        table = pq.read_table(io.BytesIO(meta.source.read_bytes(rel)))
        episodes = table.column("episode_index").to_pylist()
        for key, by_episode in spans.items():
            for end, side in ((0, "from"), (1, "to")):
                name = f"videos/{key}/{side}_timestamp"
                old = table.column(name).to_pylist()
                values = [by_episode[e][end] if e in by_episode else v for e, v in zip(episodes, old, strict=True)]
                column = pa.array(values, type=table.schema.field(name).type)
                table = table.set_column(table.schema.get_field_index(name), table.schema.field(name), column)
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.partial")
        pq.write_table(table, tmp)
        os.replace(tmp, target)


def check_result(meta: DatasetMeta, decoder: Decoder, options: TranscodeOptions) -> None:
    """Read the new dataset back as a loader would: its metadata's consistency, and per camera file its codec
    (probed) and the first and last frame of each episode it holds, decoded and on time within `tolerance_s`.

    Raises:
        TranscodeError: what does not hold, naming the file and the episode.
    """
    if meta.problems:  # index ranges against lengths, camera spans against lengths and each other
        raise TranscodeError(f"the new metadata is inconsistent: {describe_problems(meta.problems)}.")
    by_file: dict[str, list] = {}
    keys: dict[str, str] = {}  # each file's camera (a depth camera's file is copied, not re-encoded)
    for ep in meta.episodes.values():
        for key, span in ep.videos.items():
            if span.path in meta.files:
                by_file.setdefault(span.path, []).append((ep, key))
                keys[span.path] = key
    for path, pairs in by_file.items():
        try:
            codec = decoder.probe(meta.source, path)["codec"]
            if keys[path] not in meta.depth and not codec_matches(options.codec, codec):
                raise TranscodeError(f"{path} decodes as {codec}, not {options.codec}.")
            for ep, key in pairs:  # its first frame at from_timestamp, its last where the file's index has it
                queries = [ep.videos[key].from_timestamp, span_ends(meta, ep, key)[1]]
                read = decoder.depth_frames if key in meta.depth else decoder.frames_at
                pts = read(meta.source, path, queries).pts_s.tolist()
                late = max(abs(p - q) for p, q in zip(pts, queries, strict=True))
                if late >= options.tolerance_s:
                    raise TranscodeError(f"{path}: episode {ep.index}'s first or last frame decodes {late:.6f} s from "
                                         f"its time (tolerance {options.tolerance_s} s).")
        except TranscodeError:
            raise
        except DlError as exc:
            raise TranscodeError(f"{path} of the new dataset does not decode: {describe(exc)}") from None
    decoder.cache.clear()


def write_json(path: Path, document: dict) -> None:
    """`document` as indented JSON at `path`, through a temporary name (the file is whole or absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(json.dumps(document, indent=4) + "\n")
    os.replace(tmp, path)
