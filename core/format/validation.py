"""Checking every file a dataset selection needs, as `dl validate` does: every check the loaders run as they read
(`dl.format.episode_checks`, `dl.format.checks`, `dl.format.streams`, `dl.format.columns`) applied to every selected
episode at once, collected instead of stopping at the first, plus every video frame and stored image decoded, so a
truncated or corrupt file, or one whose frames are not where meta/episodes says, shows before a training run meets
it. What `dl run` would refuse or fail on for a selection, `validate` reports for it."""

import time
from collections.abc import Callable

from ..contracts.decoder import Decoder
from ..contracts.errors import DlError, describe, format_indices
from .checks import check_rows, nonfinite_counts
from .columns import ImageColumn
from .findings import Finding, Validation, collected
from .locate import data_file_of, warn_moved
from .metadata import DatasetMeta, EpisodeMeta
from .tabular import episode_arrays, read_episode_tables, tabular_keys
from .timestamp_checks import check_tolerance, suggest_tolerance
from .video_validation import check_videos

DECODE_MODES = ("all", "ends")
"""`validate`'s `decode`: every frame and image ("all"), or each episode's first and last ("ends", quicker)."""


def validate(meta: DatasetMeta, decoder: Decoder, episodes: list[int] | None = None, *, tolerance_s: float = 1e-4,
             frame_pairing: str = "timestamp", strict: bool = False, decode: str = "all",
             progress: Callable[[int, int], None] | None = None) -> Validation:
    """Every problem of the selected episodes (default: all meta/episodes has): metadata (`DatasetMeta.problems`,
    info.json's totals against a selection of all), missing files, data parquet (readable, rows found by global
    index, columns of the feature's kind and shape, frame_index, timestamps against fps and against `tolerance_s`,
    task indices, NaN/inf: warnings, errors with `strict`), image features (decoded), videos (open, codec, frame
    rate and size against info.json and each other, spans inside the file, every frame decoded with `decode="all"`,
    else each episode's first and last, each episode's first and last frame found at its expected time), and the
    warnings LeRobot-accepted disagreements raise. Timestamps are checked against each video file's frame times
    (its index, `dl.format.timestamp_checks`), as `dl run` checks them, with the same `tolerance_s` and
    `frame_pairing`.

    Args:
        progress: called with (files checked, files to check).

    Raises:
        DlError: an episode index that is not in the dataset, or an unknown `decode`.
    """
    if decode not in DECODE_MODES:
        raise DlError(f"validate: decode must be one of {', '.join(DECODE_MODES)}, got {decode!r}.")
    out = Validation()
    chosen = sorted(meta.episodes) if episodes is None else sorted(set(episodes))
    unknown = [i for i in chosen if i not in meta.episodes]
    if unknown:
        raise DlError(f"episode(s) {format_indices(unknown)} are not in {meta.source.url} (it has episodes "
                      f"{format_indices(list(meta.episodes))}).")
    out.episodes = chosen
    if episodes is None:
        _check_all_selected(meta, out)
    usable = _check_metadata(meta, chosen, out)
    data = _by(usable, lambda ep: [ep.data_path])
    videos = _by(usable, lambda ep: [(key, span.path) for key, span in ep.videos.items()])
    total, done = len(data) + len(videos), 0
    moved: dict[int, tuple[str, str]] = {}
    for ep in usable:
        try:
            data_file_of(meta, ep, moved)
        except DlError:
            pass  # reported with its data file below
    with collected(out):
        warn_moved(meta, moved)
    for path, eps in data.items():
        with collected(out, path):
            _check_data(meta, decoder, path, eps, (tolerance_s, frame_pairing), strict, decode, out)
        done += 1
        if progress:
            progress(done, total)
    check_videos(meta, decoder, videos, decode, out, (lambda n: progress(len(data) + n, total)) if progress else None,
                 tolerance_s)
    if out.largest_gap is not None and out.largest_gap[0] >= tolerance_s:
        gap, episode = out.largest_gap
        fix = (f"--tolerance-s {suggest_tolerance(gap)} serves every checked episode, each row getting its nearest "
               "frame as in LeRobot" if suggest_tolerance(gap) < 0.5 / meta.fps else
               "no tolerance_s under half a frame period serves them: --frame-pairing row where an episode's video "
               "holds one frame per row (each episode's line says), else fix the timestamps")
        out.findings.append(Finding("error", "", f"timestamps: the largest gap between a row's timestamp and its "
                                                 f"camera frame is {gap:.6f} s (episode {episode}), more than "
                                                 f"tolerance_s={tolerance_s}; {fix}"))
    out.finish()
    return out


def _check_all_selected(meta: DatasetMeta, out: Validation) -> None:
    """The selection "all" needs every episode info.json counts (`DatasetMeta.select`)."""
    try:
        meta.select(None)
    except DlError as exc:
        if "total_episodes" in str(exc):
            out.findings.append(Finding("error", "meta/info.json", f"{describe(exc)} (`dl run` without --episodes "
                                                                    "refuses the dataset)"))


def _check_metadata(meta: DatasetMeta, chosen: list[int], out: Validation) -> list[EpisodeMeta]:
    """Findings for wrong episode metadata and missing files; returns the episodes whose files can be checked."""
    for e in chosen:
        if e in meta.problems:
            out.findings.append(Finding("error", "meta/episodes", f"episode {e}: {meta.problems[e]}", (e,)))
    selected = [meta.episodes[i] for i in chosen if i not in meta.problems]
    missing = meta.missing_files(selected)
    for path, eps in missing.items():
        out.findings.append(Finding("error", path, "missing (a partial download?)", tuple(eps)))
    return [ep for ep in selected if not any(f in missing for f in ep.files())]


def _by(episodes: list[EpisodeMeta], files: Callable) -> dict:
    found: dict = {}
    for ep in episodes:
        for f in files(ep):
            found.setdefault(f, []).append(ep)
    return found


def _check_data(meta: DatasetMeta, decoder: Decoder, path: str, eps: list[EpisodeMeta],
                frames: tuple[float, str], strict: bool, decode: str, out: Validation) -> None:
    """Findings of data file `path`'s episodes `eps`; `frames`: (tolerance_s, frame_pairing)."""
    tolerance_s, frame_pairing = frames
    keys = tabular_keys(meta) + meta.image_keys
    try:
        tables = read_episode_tables(meta, eps, keys)
    except DlError as whole:
        if len(eps) == 1:
            out.findings.append(Finding("error", path, describe(whole), (eps[0].index,)))
            return
        tables = {}
        failed: dict[str, list[int]] = {}  # narrow it down: which episodes of this file fail, and why
        for ep in eps:
            try:
                tables.update(read_episode_tables(meta, [ep], keys))
            except DlError as exc:
                failed.setdefault(describe(exc), []).append(ep.index)
        out.findings += [Finding("error", path, message, tuple(indices)) for message, indices in failed.items()]
    counts: dict[str, int] = {}
    with_nonfinite = []
    for ep in eps:
        if ep.index not in tables:
            continue
        where = f"{meta.source.url}/{path} (episode {ep.index})"
        try:
            arrays = episode_arrays(tables[ep.index], meta.features, where)
            gap, _ = check_rows(meta, ep, arrays, None, frame_pairing)
            if ep.videos and (out.largest_gap is None or gap > out.largest_gap[0]):
                out.largest_gap = (gap, ep.index)
            if gap >= tolerance_s:
                check_tolerance(f"{meta.source.url}/{path}", meta, ep, arrays["timestamp"], tolerance_s)
            _decode_images(meta, decoder, ep, arrays, decode, out)
        except DlError as exc:
            out.findings.append(Finding("error", path, describe(exc), (ep.index,)))
            continue
        for key, n in nonfinite_counts(meta.features, arrays).items():
            counts[key] = counts.get(key, 0) + n
            with_nonfinite.append(ep.index)
    if counts:
        what = ", ".join(f"{key}: {n}" for key, n in counts.items())
        eps_nf = sorted(set(with_nonfinite))
        text = f"NaN or inf values in episode(s) {format_indices(eps_nf)} ({what})"
        if strict:
            out.findings.append(Finding("error", path, f"{text}; refused with --strict", tuple(eps_nf)))
        else:
            out.warn(f"{meta.source.url}/{path}: {text}; served as stored, as LeRobot does (--strict refuses them)")


def _decode_images(meta: DatasetMeta, decoder: Decoder, ep: EpisodeMeta, arrays: dict, decode: str,
                   out: Validation) -> None:
    """Decode the episode's stored images (all, or the first and last): a corrupt image raises there."""
    for key in meta.image_keys:
        column: ImageColumn = arrays[key]
        rows = range(len(column)) if decode == "all" else sorted({0, len(column) - 1})
        t0 = time.perf_counter()
        for row in rows:
            try:
                decoder.decode_images([column[row]])
            except DlError as exc:
                raise DlError(f"image feature {key}, row {row}: {describe(exc)}") from None
        out.decode_s += time.perf_counter() - t0
        out.images_decoded += len(rows)
