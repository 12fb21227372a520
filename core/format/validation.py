"""Checking every file a dataset selection needs, as `dl validate` does: the checks loaders run as they
read (`dl.format.checks`) applied to every episode at once, plus each video opened and its last needed
frame decoded, so a truncated or corrupt file shows before a training run meets it."""

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from ..contracts.decoder import Decoder
from ..contracts.errors import DlError, describe
from .checks import check_streams_facts
from .metadata import DatasetMeta, EpisodeMeta
from .tabular import read_episode_tables, tabular_keys


@dataclass(frozen=True)
class Finding:
    """One problem: `severity` "error" (values would be wrong or a file is unusable) or "warning" (LeRobot
    accepts it and dl serves the right values), the `path` it concerns (relative to the root; "" for the
    dataset), the `episodes` affected, and the `message`."""

    severity: str
    path: str
    message: str
    episodes: tuple[int, ...] = field(default_factory=tuple)


def validate(meta: DatasetMeta, decoder: Decoder, episodes: list[int] | None = None,
             progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    """Every problem of the selected episodes (default: all): missing files, unreadable or inconsistent data
    parquet (row counts, global indices, frame_index, timestamps), videos that cannot be opened or are too
    short for their episodes (the last needed frame is decoded), and the warnings LeRobot-accepted
    disagreements raise (codec, frame rate, totals).

    Args:
        progress: called with (files checked, files to check).

    Raises:
        DlError: an episode index that is not in the dataset.
    """
    chosen = sorted(meta.episodes) if episodes is None else sorted(set(episodes))
    unknown = [i for i in chosen if i not in meta.episodes]
    if unknown:
        raise DlError(f"episode(s) {unknown} are not in {meta.source.url}.")
    selected = [meta.episodes[i] for i in chosen]
    findings: list[Finding] = []
    missing = meta.missing_files(selected)
    for path, eps in missing.items():
        findings.append(Finding("error", path, "missing (a partial download?)", tuple(eps)))
    data = _by(selected, lambda ep: [ep.data_path])
    videos = _by(selected, lambda ep: [(key, span.path) for key, span in ep.videos.items()])
    total, done = len(data) + len(videos), 0
    keys = tabular_keys(meta)
    warned: dict[str, list[str]] = {}  # a warning's text with its file left out -> the files it concerns
    for path, eps in data.items():
        if path not in missing:
            findings += _check_data(meta, path, eps, keys)
        done += 1
        if progress:
            progress(done, total)
    for (key, path), eps in videos.items():
        if path not in missing:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                findings += _check_video(meta, decoder, key, path, eps)
            for w in caught:
                warned.setdefault(str(w.message).replace(path, "{file}"), []).append(path)
        done += 1
        if progress:
            progress(done, total)
    for text, paths in warned.items():
        paths = sorted(set(paths))
        more = f" (the same for {len(paths) - 1} more file(s), up to {paths[-1]})" if len(paths) > 1 else ""
        findings.append(Finding("warning", "", text.replace("{file}", paths[0]) + more))
    return findings


def _by(episodes: list[EpisodeMeta], files: Callable) -> dict:
    out: dict = {}
    for ep in episodes:
        for f in files(ep):
            out.setdefault(f, []).append(ep)
    return out


def _check_data(meta: DatasetMeta, path: str, eps: list[EpisodeMeta], keys: list[str]) -> list[Finding]:
    try:
        read_episode_tables(meta, eps, keys)
        return []
    except DlError as whole:
        if len(eps) == 1:
            return [Finding("error", path, describe(whole), (eps[0].index,))]
    failed: dict[str, list[int]] = {}  # narrow it down: which episodes of this file fail, and why
    for ep in eps:
        try:
            read_episode_tables(meta, [ep], keys)
        except DlError as exc:
            failed.setdefault(describe(exc), []).append(ep.index)
    return [Finding("error", path, message, tuple(indices)) for message, indices in failed.items()]


def _check_video(meta: DatasetMeta, decoder: Decoder, key: str, path: str, eps: list[EpisodeMeta]) -> list[Finding]:
    indices = tuple(ep.index for ep in eps)
    try:
        facts = decoder.probe(meta.source, path)
    except DlError as exc:
        return [Finding("error", path, f"{describe(exc)}{_first_bytes(meta, path)}", indices)]
    findings = []
    for ep in eps:
        try:
            check_streams_facts(meta, key, ep, path, facts)
        except DlError as exc:
            findings.append(Finding("error", path, describe(exc), (ep.index,)))
    last = max(ep.videos[key].from_timestamp + (ep.length - 1) / meta.fps for ep in eps)
    try:
        decoder.frames_at(meta.source, path, [last])
    except DlError as exc:
        findings.append(Finding("error", path, f"its last needed frame ({last:.3f} s) does not decode: "
                                               f"{describe(exc)}", indices))
    return findings


def _first_bytes(meta: DatasetMeta, path: str) -> str:
    try:
        head = meta.source.read_bytes(path, 0, 16)
    except (DlError, OSError):
        return ""
    return f" (its first bytes are {head!r}; an mp4 starts with a box such as b'....ftyp')"
