"""`dl cache`: what dl keeps in its cache folder, how big each part is and the limit dl holds it to; `--clear`."""

import json
import os
import shutil

import click
from rich.markup import escape
from rich.table import Table

from .console import make_console


def folders() -> dict[str, tuple[str, str]]:
    """dl's own subfolders: what fills each, and the limit dl keeps it under (from the constants dl keeps them by)."""
    import inspect

    from dl.contracts.units import parse_bytes
    from dl.format.frame_times import CACHE_LIMIT_BYTES
    from dl.format.kept_screens import LIMIT_BYTES
    from dl.plugins.map.dataset import MapDataset
    from dl.plugins.remote.options import DEFAULT_CACHE_BYTES

    from .labels import format_size

    tabular = format_size(parse_bytes(inspect.signature(MapDataset).parameters["tabular_cache_bytes"].default))
    return {
        "tabular": ("the map loader's memory-mapped Arrow rows, one file per selection",
                    f"{tabular}, least recently used first (map loader option tabular_cache_bytes)"),
        "frame_times": ("each video file's frame times, read from its MP4 index",
                        f"{format_size(CACHE_LIMIT_BYTES)}, least recently used first"),
        "screens": ("the row checks' per-episode results of a selection, for the next open",
                    f"{format_size(LIMIT_BYTES)}, least recently used first"),
        "remote": ("remote sources' downloaded byte blocks, a folder per host ($SLURM_TMPDIR or $TMPDIR first)",
                   f"{format_size(DEFAULT_CACHE_BYTES)} per host (source option cache_bytes)"),
        "datasets": ("dl run's embedded default dataset, written once", "none: about 20 MB"),
        "bench": ("datasets and runs the benchmarks in benchmarks/ generate", "none: clear it when done"),
    }




def folder_size(path: str) -> tuple[int, int]:
    """(bytes, files) under `path`."""
    total = count = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
                count += 1
            except OSError:
                pass
    return total, count


@click.command("cache")
@click.argument("names", nargs=-1)
@click.option("--clear", is_flag=True, help="Delete the named subfolders (all of them when none is named).")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON (for scripts).")
def cache(names, clear, as_json):
    """List dl's cache folder ($DL_CACHE_DIR, else $XDG_CACHE_HOME/dl, else ~/.cache/dl): each subfolder, its
    size and files, what fills it and the limit dl keeps it under. With --clear, delete the NAMES given (e.g.
    `dl cache --clear bench tabular`), or everything; dl rebuilds what it needs on the next run."""
    from dl.kits.paths import cache_dir

    root = cache_dir()
    present = sorted(p.name for p in root.iterdir() if p.is_dir())
    unknown = [n for n in names if n not in present]
    if unknown:
        held = ", ".join(present) or "none"
        raise click.BadParameter(f"no subfolder {', '.join(unknown)} in {root}; it holds {held}.", param_hint="NAMES")
    chosen = list(names) or present
    if clear:
        freed = 0
        for name in chosen:
            freed += folder_size(str(root / name))[0]
            shutil.rmtree(root / name, ignore_errors=True)
        make_console().print(f"cleared {', '.join(chosen) or 'nothing'} from {root}: {freed / 1e6:.1f} MB freed",
                             highlight=False, markup=False)
        return
    rows, known = [], folders()
    for name in chosen:
        size, files = folder_size(str(root / name))
        what, limit = known.get(name, ("not one of dl's own folders", "-"))
        rows.append({"name": name, "bytes": size, "files": files, "holds": what, "limit": limit})
    if as_json:
        click.echo(json.dumps({"cache_dir": str(root), "folders": rows}, indent=1))
        return
    table = Table(title=f"{escape(str(root))}: {sum(r['bytes'] for r in rows) / 1e6:.1f} MB")
    for column in ("folder", "size", "files", "holds", "kept under"):
        table.add_column(column, justify="right" if column in ("size", "files") else "left")
    for r in rows:
        table.add_row(escape(r["name"]), f"{r['bytes'] / 1e6:.1f} MB", str(r["files"]), escape(r["holds"]),
                      escape(r["limit"]))
    make_console().print(table)
