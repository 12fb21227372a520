"""Where a remote source's cache puts its files: one run folder per process, `run-<host>-<pid>-<start time>`, under
a base folder (node-local storage first), and the clean-up of folders that crashed processes left behind on this
host (never another host's: the base may be a folder several nodes share)."""

import glob
import os
import shutil
import socket
from pathlib import Path

import psutil

from ..paths import cache_dir

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


def run_dir(base: Path) -> Path:
    """This process's run folder `run-<host>-<pid>-<start time>`, after removing this host's folders of processes
    that are gone (crashed runs). Folders of other hosts, and of names it cannot read, are left alone."""
    base.mkdir(parents=True, exist_ok=True)
    host = host_name()
    for old in base.glob(f"run-{glob.escape(host)}-*"):
        try:
            owner, pid, started = old.name.rsplit("-", 2)
            pid, started = int(pid), int(started)
        except ValueError:
            continue
        if owner != f"run-{host}":
            continue
        try:
            alive = psutil.pid_exists(pid) and int(psutil.Process(pid).create_time()) == started
        except psutil.Error:
            alive = False
        if not alive:
            shutil.rmtree(old, ignore_errors=True)
    me = psutil.Process()
    path = base / f"run-{host}-{me.pid}-{int(me.create_time())}"
    path.mkdir(exist_ok=True)
    return path
