"""Where a remote source's cache puts its files: one run folder per cache, `run-<host>-<pid>-<start time>.<n>` (the
process's n-th cache: the sources of a mixture have one each), under a base folder (node-local storage first);
and the clean-up of folders that crashed processes left behind on this host (never another host's: the base may
be a folder several nodes share).
"""

import glob
import itertools
import os
import shutil
import socket
from pathlib import Path

import psutil

from ..paths import cache_dir

_CACHES = itertools.count()
HOST_ENV = "DL_HOSTNAME"
"""Overrides the host name in run folders (default: `socket.gethostname()`), e.g. where nodes share a name."""


def host_name() -> str:
    """This machine's name as run folders carry it: `$DL_HOSTNAME`, else `socket.gethostname()`, with path
    separators replaced."""
    return (os.environ.get(HOST_ENV) or socket.gethostname() or "localhost").replace("/", "_").replace(os.sep, "_")


def default_base() -> Path:
    """Where run folders go unless a source's `cache_dir` says otherwise: node-local storage when the
    environment names it (`$SLURM_TMPDIR`, then `$TMPDIR`, each `.../dl-remote`), else dl's cache folder
    (`dl.kits.paths.cache_dir("remote")`, often a home directory nodes share)."""
    for variable in ("SLURM_TMPDIR", "TMPDIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable]) / "dl-remote"
    return cache_dir("remote")


def host_runs(base: Path) -> list[Path]:
    """This host's run folders under `base` (of live processes and of crashed ones not cleaned up yet)."""
    prefix = f"run-{host_name()}"
    return [path for path in Path(base).glob(f"{glob.escape(prefix)}-*")
            if (owner := _owner(path)) is not None and owner[0] == prefix]


def _owner(path: Path) -> tuple[str, int, int] | None:
    """`(run-<host>, pid, start time)` of a run folder's name, None for another name."""
    try:
        owner, pid, started = path.name.rsplit("-", 2)
        return owner, int(pid), int(started.partition(".")[0])
    except ValueError:
        return None


def run_dir(base: Path) -> Path:
    """A new run folder of this process, `run-<host>-<pid>-<start time>.<n>`, after removing this host's folders of
    processes that are gone (crashed runs). Folders of other hosts, and of names it cannot read, are left alone."""
    base.mkdir(parents=True, exist_ok=True)
    for old in host_runs(base):
        _, pid, started = _owner(old)
        try:
            alive = psutil.pid_exists(pid) and int(psutil.Process(pid).create_time()) == started
        except psutil.Error:
            alive = False
        if not alive:
            shutil.rmtree(old, ignore_errors=True)
    me = psutil.Process()
    path = base / f"run-{host_name()}-{me.pid}-{int(me.create_time())}.{next(_CACHES)}"
    path.mkdir(exist_ok=True)
    return path
