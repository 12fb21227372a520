"""Each video file's MP4 index (`dl.kits.mp4_index.SampleIndex`: every frame's presentation time, byte offset, size
and keyframe flag), parsed once and read by everything that needs it: the frame times (`dl.format.frame_times`), a
remote source's byte-range plans (`dl.kits.remote.plans`), the pool's keyframe grid (`dl.plugins.pool.gop`) and
torchcodec's seek-mode check (`dl.kits.video.frame_grid`). This is the one module that calls the parser.

A source's indexes are kept on the source object (`indexes_of`), so they go where it goes: inherited by forked
DataLoader workers, pickled into spawned ones, and written into the metadata snapshot `dl run`'s host hands to every
run and rank (`DatasetMeta.to_snapshot`, through `VideoIndexes.state` / `restore`): no process parses a file again
that the host parsed.
"""

import base64

import numpy as np

from .mp4_index import Mp4IndexError, Read, SampleIndex, read_index

ARRAYS = {"offsets": np.int64, "sizes": np.int64, "pts": np.int64, "keyframes": np.bool_}
"""A `SampleIndex`'s per-frame arrays and their dtypes, as `state` packs them."""


class VideoIndexes:
    """The indexes of one source's video files asked for so far: `found` (`{relative path: SampleIndex}`) and
    `unindexed` (`{relative path: why the parser refused it}`: fragmented MP4, Matroska, no video track...)."""

    def __init__(self):
        self.found: dict[str, SampleIndex] = {}
        self.unindexed: dict[str, str] = {}

    def known(self, path: str) -> bool:
        """Whether `path` was indexed or refused already (`get` then reads nothing)."""
        return path in self.found or path in self.unindexed

    def get(self, path: str, size: int, read: Read, name: str) -> SampleIndex | None:
        """`path`'s index: the one held, else parsed now (`dl.kits.mp4_index.read_index`, a few reads) and held.

        Args:
            path: the file, relative to the source's root.
            size: its size in bytes.
            read: `read(start, end)`, its bytes `[start, end)`; the caller chooses the read path (a remote source's
                block cache, or one ranged request).
            name: the file in messages (its URL).

        Returns:
            The index, or None when the parser refuses the file (the reason is then `unindexed[path]`).

        Raises:
            whatever `read` raises (a missing file, a remote read that gave up); nothing is held then.
        """
        if not self.known(path):
            try:
                self.found[path] = read_index(read, size, name)
            except Mp4IndexError as exc:
                self.unindexed[path] = str(exc)
        return self.found.get(path)

    def state(self) -> dict:
        """JSON-ready: every index held (its arrays base64-packed) and every refusal."""
        return {"found": {path: _packed(index) for path, index in self.found.items()},
                "unindexed": dict(self.unindexed)}

    def restore(self, state: dict) -> None:
        """Add what `state()` returned in another process (the host)."""
        self.found.update({path: _unpacked(packed) for path, packed in state.get("found", {}).items()})
        self.unindexed.update(state.get("unindexed", {}))


def indexes_of(source) -> VideoIndexes:
    """The `VideoIndexes` of `source` (a `dl.Source`), made on first use and kept as its `video_indexes` attribute."""
    indexes = getattr(source, "video_indexes", None)
    if indexes is None:
        indexes = source.video_indexes = VideoIndexes()
    return indexes


def _packed(index: SampleIndex) -> dict:
    arrays = {key: base64.b64encode(np.ascontiguousarray(getattr(index, key), dtype).tobytes()).decode()
              for key, dtype in ARRAYS.items()}
    return {**arrays, "timescale": index.timescale, "header": [list(r) for r in index.header], "size": index.size,
            "moov": list(index.moov), "codec": index.codec}


def _unpacked(packed: dict) -> SampleIndex:
    arrays = {key: np.frombuffer(base64.b64decode(packed[key]), dtype).copy() for key, dtype in ARRAYS.items()}
    return SampleIndex(**arrays, timescale=int(packed["timescale"]),
                       header=tuple((int(a), int(b)) for a, b in packed["header"]), size=int(packed["size"]),
                       moov=(int(packed["moov"][0]), int(packed["moov"][1])), codec=str(packed["codec"]))
