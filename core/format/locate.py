"""Where an episode's rows are: found by their global `index` range, in the data file meta/episodes names or, where
that file does not hold them, in its neighbours in the listing.

LeRobot reads rows by `dataset_from_index` / `dataset_to_index` (and `episode_index`) over every data file, so it
never looks at an episode's `data/chunk_index` / `data/file_index`. Its v2.1 -> v3.0 converter (LeRobot <= 0.4.x,
`convert_dataset_v21_to_v30.convert_data`) records the episode that starts each new data file with the previous
file's indices, so every converted dataset with more than one data file names the wrong file for one episode per
file boundary. dl finds those rows in the next file and says so once.

Each data file's row-group `index` statistics (its footer) are read once per process and kept (a few numbers
per row group), so locating costs no request beyond the footer the first read of a file needs anyway; a moved
episode costs one footer read of its neighbour.
"""

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..contracts.errors import DatasetFormatError, format_indices, warn

CONVERTER_CAUSE = ("meta/episodes names the previous data file for the first episode of each new file, as LeRobot's "
                   "v2.1 -> v3.0 converter (LeRobot <= 0.4.x) writes it")


Range = tuple[int, int] | None
"""A row group's (min, max) of a column, inclusive; None where the footer has no statistics."""


@dataclass(frozen=True)
class FileIndex:
    """One data file's row groups as its footer describes them: `groups[g]` the range of row group g's `index`
    column, `episodes[g]` of its `episode_index` column; and the file's `rows`."""

    groups: tuple[Range, ...]
    episodes: tuple[Range, ...]
    rows: int

    def groups_touching(self, lo: int, hi: int) -> list[int]:
        """Row groups that may hold a global index in [lo, hi] (inclusive)."""
        return [g for g, r in enumerate(self.groups) if _overlaps(r, lo, hi)]

    def groups_of(self, episode) -> list[int]:
        """Row groups that may hold `episode`'s rows: by its global index range or by its `episode_index` (so rows
        of the episode beyond the range meta/episodes gives are seen too)."""
        lo, hi = episode.dataset_from_index, episode.dataset_to_index - 1
        return [g for g, (r, e) in enumerate(zip(self.groups, self.episodes, strict=True))
                if _overlaps(r, lo, hi) or _overlaps(e, episode.index, episode.index)]

    def may_hold(self, lo: int, hi: int) -> bool:
        return bool(self.groups_touching(lo, hi))


def _overlaps(found: Range, lo: int, hi: int) -> bool:
    return found is None or (found[0] <= hi and found[1] >= lo)


_INDEXES: "OrderedDict[tuple[str, str, int | None], FileIndex]" = OrderedDict()
_INDEXES_KEPT = 4096
_WARNED: set[tuple[str, int]] = set()


def file_index(meta, path: str, pf: pq.ParquetFile | None = None) -> FileIndex:
    """The `FileIndex` of data file `path`, from this process's cache or its footer (`pf` if already open).

    Raises:
        DatasetFormatError: the file is not readable parquet or has no `index` column.
    """
    key = (meta.source.url, path, meta.files.get(path))  # the listed size: a rewritten file is read again
    found = _INDEXES.get(key)
    if found is not None:
        _INDEXES.move_to_end(key)
        return found
    if pf is None:
        with meta.source.open(path) as f:
            return file_index(meta, path, _parquet(meta, path, f))
    names = [pf.metadata.schema.column(i).path for i in range(pf.metadata.num_columns)]
    for column in ("index", "episode_index"):
        if column not in names:
            raise DatasetFormatError(f"{meta.source.url}/{path} has no {column!r} column; LeRobot v3.0 data files "
                                     "hold each row's global index and episode there.")
    found = _INDEXES[key] = FileIndex(_ranges(pf, names.index("index")), _ranges(pf, names.index("episode_index")),
                                      pf.metadata.num_rows)
    while len(_INDEXES) > _INDEXES_KEPT:
        _INDEXES.popitem(last=False)
    return found


def _ranges(pf: pq.ParquetFile, leaf: int) -> tuple[Range, ...]:
    out = []
    for g in range(pf.num_row_groups):
        stats = pf.metadata.row_group(g).column(leaf).statistics
        out.append((int(stats.min), int(stats.max)) if stats is not None and stats.has_min_max else None)
    return tuple(out)


def _parquet(meta, path: str, f) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError, EOFError) as exc:
        raise DatasetFormatError(f"{meta.source.url}/{path} is not a readable parquet file ({exc}); it may be "
                                 "truncated or corrupt. Re-download it, or leave out the episodes it holds.") from None


def data_files(meta) -> list[str]:
    """The dataset's data parquet files, in listing order (the order LeRobot's writers number them)."""
    top = meta.info["data_path"].split("/")[0]
    return [f for f in meta.files if f.startswith(top + "/") and f.endswith(".parquet")]


def data_file_of(meta, episode, moved: dict | None = None) -> str:
    """The data file holding `episode`'s rows: the one meta/episodes names when its index statistics admit the
    episode's global index range, else the neighbour (next, then previous file in the listing) that does. A move
    is recorded in `moved` (`{episode: (named file, actual file)}`) when given, else warned about once per
    episode and process (`warn_moved`).

    Raises:
        DatasetFormatError: neither the named file nor a neighbour holds the range.
    """
    named = episode.data_path
    lo, hi = episode.dataset_from_index, episode.dataset_to_index - 1
    if episode.length == 0 or file_index(meta, named).may_hold(lo, hi):
        return named
    files = data_files(meta)
    at = files.index(named) if named in files else -1
    neighbours = [files[i] for i in (at + 1, at - 1) if at >= 0 and 0 <= i < len(files)]
    for path in neighbours:
        if file_index(meta, path).may_hold(lo, hi):
            if moved is None:
                warn_moved(meta, {episode.index: (named, path)})
            else:
                moved[episode.index] = (named, path)
            return path
    raise DatasetFormatError(
        f"{meta.source.url}/{named}: episode {episode.index} has 0 rows: its global indices [{lo}, {hi + 1}) are in "
        f"neither this file nor its neighbours ({', '.join(neighbours) or 'none'}). meta/episodes and the data "
        "disagree; restore them from the dataset's origin, or leave the episode out.")


def warn_moved(meta, moved: dict[int, tuple[str, str]]) -> None:
    """One warning naming the episodes whose rows are in another data file than meta/episodes says (`{episode:
    (named file, actual file)}`), each episode warned about once per process."""
    fresh = {e: paths for e, paths in moved.items() if (meta.source.url, e) not in _WARNED}
    if not fresh:
        return
    _WARNED.update((meta.source.url, e) for e in fresh)
    named, actual = next(iter(fresh.values()))
    first = f"episode {next(iter(fresh))}'s rows are in {actual}, not {named}"
    more = f" (and {len(fresh) - 1} more such episode(s): {format_indices(list(fresh)[1:])})" if len(fresh) > 1 else ""
    warn(f"{meta.source.url}/{named}: {first}{more}: {CONVERTER_CAUSE}; dl reads each episode's rows by its global "
         "index range, as LeRobot does.")


def locate_all(meta, episodes) -> None:
    """Locate every episode of a selection up front (the `map` loader), with one warning for all moved episodes.
    Vectorized over a selection (`dl.format.episodes.EpisodeSelection`): only the episodes whose named file's
    statistics do not admit their index range go through `data_file_of`.

    Raises:
        DatasetFormatError: as `data_file_of`.
    """
    moved: dict[int, tuple[str, str]] = {}
    for episode in _unplaced(meta, episodes):
        data_file_of(meta, episode, moved)
    warn_moved(meta, moved)


def _unplaced(meta, episodes) -> list:
    """The episodes (non-empty) whose named data file's row-group `index` statistics do not admit their global
    index range: `FileIndex.may_hold` over a whole selection at once (every episode of a plain list)."""
    columns, at = getattr(episodes, "columns", None), getattr(episodes, "positions", None)
    if columns is None:
        return list(episodes)
    lo, hi = columns.dataset_from_index[at], columns.dataset_to_index[at] - 1
    files = columns.data_file[at]
    placed = columns.length[at] == 0
    for file in np.unique(files).tolist():
        mine = files == file
        for found in file_index(meta, columns.data_paths[file]).groups:
            placed |= mine & (True if found is None else (lo <= found[1]) & (hi >= found[0]))
    return [episodes[i] for i in np.flatnonzero(~placed).tolist()]


def rows_of(index: np.ndarray, episode_index: np.ndarray, episodes: list) -> dict[int, tuple[int, int] | str]:
    """`rows_in` of several episodes among the same rows, `{episode index: (first, end) or what is wrong}`, in a few
    passes over the rows whatever the number of episodes: an episode whose rows are one run of its `episode_index`,
    of its `length`, indexed `dataset_from_index` onwards by ones, whose index range holds no other episode's row,
    is placed at once; the others go through `rows_in`, which says what is wrong."""
    placed: dict[int, tuple[int, int] | str] = {}
    n = len(episode_index)
    if n and episodes:
        opens = np.flatnonzero(np.diff(episode_index)) + 1
        starts, ends = np.concatenate([[0], opens]), np.concatenate([opens, [n]])
        owner = episode_index[starts]
        order = np.argsort(owner, kind="stable")
        repeated = np.zeros(len(owner), dtype=bool)  # an episode in several runs: not contiguous
        twice = owner[order][1:] == owner[order][:-1]
        repeated[order[1:][twice]] = repeated[order[:-1][twice]] = True
        run_of = np.repeat(np.arange(len(starts)), ends - starts)
        stepped = np.add.reduceat((index != index[starts][run_of] + np.arange(n) - starts[run_of]).astype(np.int64),
                                  starts) > 0
        want = np.array([ep.index for ep in episodes], dtype=np.int64)
        lo = np.array([ep.dataset_from_index for ep in episodes], dtype=np.int64)
        length = np.array([ep.length for ep in episodes], dtype=np.int64)
        at = np.searchsorted(owner[order], want).clip(max=len(owner) - 1)
        run = order[at]
        ok = ((owner[run] == want) & ~repeated[run] & ~stepped[run] & (ends[run] - starts[run] == length)
              & (index[starts[run]] == lo) & (length > 0))
        by_lo = np.flatnonzero(ok)[np.argsort(lo[ok], kind="stable")]
        overlap = lo[by_lo][1:] < (lo + length)[by_lo][:-1]  # two index ranges that overlap: both checked alone
        ok[by_lo[1:][overlap]] = ok[by_lo[:-1][overlap]] = False
        by_lo = by_lo[ok[by_lo]]
        if len(by_lo):  # a row of another episode inside an episode's index range
            k = np.searchsorted(lo[by_lo], index, side="right") - 1
            inside = (k >= 0) & (index < (lo + length)[by_lo][k.clip(min=0)])
            stray = inside & (episode_index != want[by_lo][k.clip(min=0)])
            ok[by_lo[np.unique(k[stray])]] = False
        placed = {int(e): (int(a), int(b)) for e, a, b in zip(want[ok], starts[run[ok]], ends[run[ok]], strict=True)}
    return {ep.index: placed[ep.index] if ep.index in placed else rows_in(index, episode_index, ep)
            for ep in episodes}


def rows_in(index: np.ndarray, episode_index: np.ndarray, episode) -> tuple[int, int] | str:
    """Where `episode`'s rows are among rows whose `index` / `episode_index` columns are given: `(first, end)`
    positions, or what is wrong in words (LeRobot serves an episode's rows by its global index range, its windows
    by `dataset_from_index`/`dataset_to_index`, so both must agree with the rows' `episode_index`)."""
    lo, hi = episode.dataset_from_index, episode.dataset_to_index
    by_index = np.flatnonzero((index >= lo) & (index < hi))
    mine = np.flatnonzero(episode_index == episode.index)
    contiguous = bool(len(mine)) and int(mine[-1] - mine[0]) + 1 == len(mine)
    if np.array_equal(by_index, mine) and len(mine) == episode.length and contiguous and np.array_equal(
            index[mine], np.arange(lo, hi)):
        return int(mine[0]), int(mine[-1]) + 1
    if len(mine) != episode.length or not contiguous:
        return (f"episode {episode.index} has {len(mine)} rows (contiguous: {contiguous}), meta/episodes says "
                f"{episode.length}")
    if int(index[mine[0]]) != lo:
        return f"episode {episode.index} starts at index {int(index[mine[0]])}, meta/episodes says {lo}"
    others = sorted(set(episode_index[by_index].tolist()) - {episode.index})
    return (f"the rows of episode {episode.index}'s global indices [{lo}, {hi}) hold episode(s) "
            f"{format_indices(others)}, or its indices are out of order")
