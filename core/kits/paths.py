"""Where dl keeps what it writes for reuse: $DL_CACHE_DIR, else $XDG_CACHE_HOME/dl, else ~/.cache/dl."""

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """A subfolder of dl's cache folder, created if missing."""
    base = os.environ.get("DL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dl")
    path = Path(base, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
