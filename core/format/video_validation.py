"""`dl validate`'s video checks: each file opened (`Decoder.probe`), checked against info.json (codec, frame rate,
frame size, against each other file of its camera) and against the selected episodes it holds (spans inside the
file), then decoded, every frame in runs or each episode's first and last frame, and each episode's first and last
frame looked for at the time meta/episodes gives it. A payload corrupt past a header that opens shows as a decode
error here."""

import time
from collections.abc import Callable

import numpy as np

from ..contracts.decoder import Decoder
from ..contracts.errors import DlError, describe
from .findings import Finding, collected
from .streams import check_file, warn_claims, warn_size
from .timestamp_checks import span_ends

RUN_FRAMES = 64
"""Frames per `Decoder.frames_in_run` call when every frame is decoded."""


def check_videos(meta, decoder: Decoder, videos: dict, decode: str, out, progress: Callable[[int], None] | None,
                 tolerance_s: float = 1e-4) -> None:
    """Check every `(camera key, file) -> [episodes]` of `videos`, adding findings (and decoded-frame counts) to
    `out` (a `dl.format.findings.Validation`)."""
    sizes: dict[str, dict[tuple[int, int], list[str]]] = {}
    for n, ((key, path), eps) in enumerate(videos.items(), 1):
        indices = tuple(ep.index for ep in eps)
        try:
            facts = decoder.probe(meta.source, path)
        except DlError as exc:
            out.findings.append(Finding("error", path, f"{describe(exc)}{_first_bytes(meta, path)}", indices))
            if progress:
                progress(n)
            continue
        with collected(out, path):
            size = warn_claims(meta, key, path, facts, size_too=False)
        sizes.setdefault(key, {}).setdefault(size, []).append(path)
        for ep in eps:
            try:
                check_file(meta, key, path, facts, [ep], None)
            except DlError as exc:
                out.findings.append(Finding("error", path, describe(exc), (ep.index,)))
        t0 = time.perf_counter()
        pts, failure = _decode(meta, decoder, key, path, facts, eps, decode)
        out.decode_s += time.perf_counter() - t0
        out.frames_decoded += len(pts)
        if failure is not None:
            out.findings.append(Finding("error", path, failure, indices))
        else:
            _check_ends(meta, key, path, eps, pts, tolerance_s, out)
        if progress:
            progress(n)
    for key, by_size in sizes.items():
        _check_sizes(meta, key, by_size, videos, out)


def _decode(meta, decoder: Decoder, key: str, path: str, facts: dict, eps: list, decode: str):
    """Decode the file (every frame in runs, or each episode's first and last frame); returns (the decoded frames'
    times in s, what failed or None)."""
    rate = float(facts["average_fps"] or meta.fps)
    frames = meta.frame_times.of(meta, path)  # the file's frame times (its index), else its rate's grid
    if decode == "all":
        every = frames.tolist() if frames is not None else [k / rate for k in range(int(facts["num_frames"] or 0))]
        times = [every[start:start + RUN_FRAMES] for start in range(0, len(every), RUN_FRAMES)]
    else:
        times = [list(span_ends(meta, ep, key)) for ep in eps]
    pts = []
    for run in times:
        try:
            frames = (decoder.frames_in_run if decode == "all" else decoder.frames_at)(meta.source, path, run)
        except DlError as exc:
            return np.asarray(pts), (f"frames from {run[0]:.3f} s on do not decode, the payload past the file's "
                                     f"header is corrupt (re-download or re-encode it): {describe(exc)}")
        pts += frames.pts_s.tolist()
    return np.asarray(pts, dtype=np.float64), None


def _check_ends(meta, key: str, path: str, eps: list, pts: np.ndarray, tolerance_s: float, out) -> None:
    """Each episode's first frame must show at the `from_timestamp` meta/episodes gives, and its first and last
    frame (by the file's index) must be among the decoded frames."""
    if not len(pts):
        return
    for ep in eps:
        first, last = span_ends(meta, ep, key)
        for what, t in (("first", ep.videos[key].from_timestamp), ("first", first), ("last", last)):
            nearest = pts[int(np.abs(pts - t).argmin())]
            if abs(nearest - t) >= max(tolerance_s, 1e-4):
                out.findings.append(Finding(
                    "error", path, f"episode {ep.index}'s {what} frame of camera {key} should show at {t:.6f} s "
                                   f"(meta/episodes), but the nearest frame decoded is at {nearest:.6f} s",
                    (ep.index,)))
                break


def _check_sizes(meta, key: str, by_size: dict, videos: dict, out) -> None:
    """Files of one camera with another frame size than most of its files are errors (a batch cannot hold both);
    one size for all that is not info.json's is a warning."""
    usual = max(by_size, key=lambda size: len(by_size[size]))
    for size, paths in by_size.items():
        if size == usual:
            continue
        for path in paths:
            out.findings.append(Finding(
                "error", path, f"frames are {size[1]}x{size[0]}, but camera {key}'s other files are "
                               f"{usual[1]}x{usual[0]}: a batch cannot hold both. Re-encode the file at the camera's "
                               "size, or leave its episodes out", tuple(ep.index for ep in videos[(key, path)])))
    with collected(out, by_size[usual][0]):
        where = f"{meta.source.url}/{by_size[usual][0]}"
        warn_size(meta, key, where + (f" and {len(by_size[usual]) - 1} more file(s)" if len(by_size[usual]) > 1
                                      else ""), usual)


def _first_bytes(meta, path: str) -> str:
    try:
        head = meta.source.read_bytes(path, 0, 16)
    except (DlError, OSError):
        return ""
    return f" (its first bytes are {head!r}; an mp4 starts with a box such as b'....ftyp')"
