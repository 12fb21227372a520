"""The tables of an MP4's `moov` box parsed into numpy arrays, one `frombuffer` per table: box headers, the first
video track's sample sizes, chunk offsets, decode and composition times, keyframes and edit-list shift, as
`dl.kits.mp4_index` (whose docstring names the boxes and how FFmpeg reads them) builds a `SampleIndex` from.
"""

import struct

import numpy as np

from ..contracts.errors import DlError


class Mp4IndexError(DlError):
    """The file is not an MP4 `dl.kits.mp4_index` can index (fragmented, truncated, no video track, an edit list of
    several edits); the message names the reason."""


def size_field(buf) -> int:
    """The 32-bit size field of the box header at the start of `buf` (0: the box runs to the end of the file)."""
    return struct.unpack_from(">I", buf, 0)[0]


def box_header(buf, pos: int, limit: int, name: str) -> tuple[str, int, int]:
    """(type, payload start, end) of the box at `pos` in `buf` (ends at `limit` when its size field is 0)."""
    if pos + 8 > limit:
        raise Mp4IndexError(f"{name}: a box header is cut off at byte {pos}")
    size, kind = struct.unpack_from(">I4s", buf, pos)
    head = 8
    if size == 1:
        if pos + 16 > limit:
            raise Mp4IndexError(f"{name}: a 64-bit box header is cut off at byte {pos}")
        size, head = struct.unpack_from(">Q", buf, pos + 8)[0], 16
    elif size == 0:
        size = limit - pos
    if size < head:
        raise Mp4IndexError(f"{name}: box {kind!r} at byte {pos} has an impossible size {size}")
    return kind.decode("latin-1"), pos + head, pos + size


def _children(buf, start: int, end: int, name: str) -> dict[str, list[tuple[int, int]]]:
    """The boxes in `buf[start:end]`: `{type: [(payload start, end), ...]}`."""
    out: dict[str, list[tuple[int, int]]] = {}
    pos = start
    while pos + 8 <= end:
        kind, payload, box_end = box_header(buf, pos, end, name)
        if box_end > end:
            raise Mp4IndexError(f"{name}: box {kind!r} overruns its parent (corrupt moov)")
        out.setdefault(kind, []).append((payload, box_end))
        pos = box_end
    return out


def _table(buf, box: tuple[int, int], dtype: str, fields: int, name: str, count_at: int = 4) -> np.ndarray:
    """A full box's entry table: a 32-bit count at `count_at`, then `count` entries of `fields` values."""
    start, end = box
    (count,) = struct.unpack_from(">I", buf, start + count_at)
    first = start + count_at + 4
    width = np.dtype(dtype).itemsize * fields
    if first + count * width > end:
        raise Mp4IndexError(f"{name}: a sample table claims {count} entries but its box is shorter (corrupt moov)")
    values = np.frombuffer(buf, dtype=dtype, count=count * fields, offset=first).astype(np.int64)
    return values.reshape(count, fields)


def _video_track(moov, name: str) -> tuple[dict, int]:
    top = _children(moov, 0, len(moov), name)
    movie_timescale = 1
    if "mvhd" in top:
        start, _ = top["mvhd"][0]
        version = moov[start]
        movie_timescale = struct.unpack_from(">I", moov, start + (20 if version == 1 else 12))[0]
    for start, end in top.get("trak", []):
        trak = _children(moov, start, end, name)
        if "mdia" not in trak:
            continue
        mdia = _children(moov, *trak["mdia"][0], name)
        hdlr = mdia.get("hdlr")
        if hdlr and bytes(moov[hdlr[0][0] + 8:hdlr[0][0] + 12]) == b"vide" and "minf" in mdia:
            return {"trak": trak, "mdia": mdia}, movie_timescale
    raise Mp4IndexError(f"{name} has no video track")


def track_index(moov, name: str) -> dict:
    """The first video track of `moov` (a buffer of the box's payload) as arrays in decode order: `offsets`,
    `sizes`, `pts` (edit list applied), `keyframes`, with its `timescale` and `codec`.
    Raises Mp4IndexError: no video track, or a table that is missing or corrupt (the message names `name`)."""
    track, movie_timescale = _video_track(moov, name)
    mdia = track["mdia"]
    mdhd, _ = mdia["mdhd"][0]
    timescale = struct.unpack_from(">I", moov, mdhd + (20 if moov[mdhd] == 1 else 12))[0]
    minf = _children(moov, *mdia["minf"][0], name)
    if "stbl" not in minf:
        raise Mp4IndexError(f"{name}: the video track has no sample table")
    stbl = _children(moov, *minf["stbl"][0], name)
    need = [k for k in ("stsd", "stts", "stsc") if k not in stbl]
    if need or not ({"stsz", "stz2"} & set(stbl)) or not ({"stco", "co64"} & set(stbl)):
        raise Mp4IndexError(f"{name}: the video track's sample table lacks {need or 'sizes or chunk offsets'}")
    codec = bytes(moov[stbl["stsd"][0][0] + 12:stbl["stsd"][0][0] + 16]).decode("latin-1")
    sizes = _sizes(moov, stbl, name)
    n = len(sizes)
    offsets = _offsets(moov, stbl, sizes, name)
    stts = _table(moov, stbl["stts"][0], ">u4", 2, name)
    deltas = np.repeat(stts[:, 1], stts[:, 0])
    if len(deltas) < n:
        raise Mp4IndexError(f"{name}: stts times {len(deltas)} samples, stsz sizes {n}")
    dts = np.concatenate([[0], np.cumsum(deltas[: n - 1])]).astype(np.int64) if n else np.zeros(0, np.int64)
    pts = dts.copy()
    if "ctts" in stbl:
        ctts = _table(moov, stbl["ctts"][0], ">u4", 2, name)
        shifts = np.repeat(ctts[:, 1].astype(np.uint32).view(np.int32).astype(np.int64), ctts[:, 0])  # FFmpeg: signed
        pts[: min(n, len(shifts))] += shifts[:n]
    pts += _edit_shift(moov, track["trak"], timescale, movie_timescale, name)
    keyframes = np.ones(n, dtype=bool)
    if "stss" in stbl:
        keyframes[:] = False
        sync = _table(moov, stbl["stss"][0], ">u4", 1, name)[:, 0] - 1
        keyframes[sync[(sync >= 0) & (sync < n)]] = True
    return {"offsets": offsets, "sizes": sizes, "pts": pts, "keyframes": keyframes, "timescale": int(timescale),
            "codec": codec}


def _sizes(moov, stbl: dict, name: str) -> np.ndarray:
    if "stsz" in stbl:
        start, end = stbl["stsz"][0]
        uniform, count = struct.unpack_from(">II", moov, start + 4)
        if uniform:
            return np.full(count, uniform, dtype=np.int64)
        return _table(moov, (start + 4, end), ">u4", 1, name)[:, 0]
    start, end = stbl["stz2"][0]
    field, count = moov[start + 7], struct.unpack_from(">I", moov, start + 8)[0]
    if field not in (4, 8, 16):
        raise Mp4IndexError(f"{name}: stz2 field size {field} is not 4, 8 or 16")
    raw = bytes(moov[start + 12:end])
    if field == 4:
        nibbles = np.frombuffer(raw, dtype=np.uint8)
        return np.stack([nibbles >> 4, nibbles & 15], axis=1).reshape(-1)[:count].astype(np.int64)
    return np.frombuffer(raw, dtype=">u1" if field == 8 else ">u2", count=count).astype(np.int64)


def _offsets(moov, stbl: dict, sizes: np.ndarray, name: str) -> np.ndarray:
    """Each sample's file offset: its chunk's offset plus the sizes of the samples before it in the chunk."""
    chunks = (_table(moov, stbl["stco"][0], ">u4", 1, name) if "stco" in stbl
              else _table(moov, stbl["co64"][0], ">u8", 1, name))[:, 0]
    stsc = _table(moov, stbl["stsc"][0], ">u4", 3, name)
    if not len(stsc) or not len(chunks):
        return np.zeros(0, dtype=np.int64)
    firsts = np.append(stsc[:, 0] - 1, len(chunks))
    per_chunk = np.repeat(stsc[:, 1], np.clip(np.diff(firsts), 0, None))[: len(chunks)]
    chunk_of = np.repeat(np.arange(len(per_chunk)), per_chunk)
    if len(chunk_of) < len(sizes):
        raise Mp4IndexError(f"{name}: stsc places {len(chunk_of)} samples in chunks, stsz sizes {len(sizes)}")
    chunk_of = chunk_of[: len(sizes)]
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # bytes of all samples before each one
    chunk_first = np.concatenate([[0], np.cumsum(per_chunk)[:-1]])  # each chunk's first sample
    return chunks[chunk_of] + before - before[chunk_first[chunk_of]]


def _edit_shift(moov, trak: dict, timescale: int, movie_timescale: int, name: str) -> int:
    """What the edit list adds to every pts (media timescale): leading empty edits minus the media time where
    the one edit starts. More than one non-empty edit, or a rate other than 1, is refused."""
    if "edts" not in trak:
        return 0
    edts = _children(moov, *trak["edts"][0], name)
    if "elst" not in edts:
        return 0
    start, end = edts["elst"][0]
    layout = ">Qq" if moov[start] == 1 else ">Ii"
    (count,) = struct.unpack_from(">I", moov, start + 4)
    width = struct.calcsize(layout) + 4
    if start + 8 + count * width > end:
        raise Mp4IndexError(f"{name}: the edit list claims {count} edits but its box is shorter (corrupt moov)")
    empty, media = 0, None
    for i in range(count):
        duration, media_time = struct.unpack_from(layout, moov, start + 8 + i * width)
        rate = struct.unpack_from(">h", moov, start + 8 + i * width + width - 4)[0]
        if media_time == -1:
            if media is not None:
                raise Mp4IndexError(f"{name}: an edit list with an empty edit after media is not supported")
            empty += duration
            continue
        if media is not None or rate != 1:
            raise Mp4IndexError(f"{name}: an edit list of several edits (or a rate other than 1) is not supported")
        media = media_time
    return round(empty * timescale / movie_timescale) - (media or 0)
