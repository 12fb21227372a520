"""Where a peer's library lives: this interpreter, when it imports the library, or the peer's own venv under
`DL_PEERS_DIR` (default `$ANCHOR_DIR`, else `$TMPDIR/anchor`: where `scripts/setup_peers.sh` builds them)."""

import importlib.util
import os
import tempfile
from pathlib import Path

from dl.contracts.errors import PluginError


def peers_dir() -> Path:
    """The folder holding the peers' venvs (`venv06`, `lance`, `ray`, `daft`)."""
    named = os.environ.get("DL_PEERS_DIR") or os.environ.get("ANCHOR_DIR")
    return Path(named) if named else Path(tempfile.gettempdir()) / "anchor"


def interpreter_for(loader: str, module: str, venv: str, extra: str, python: str | None = None) -> str | None:
    """The interpreter that runs loader `loader`: `python` when given, None (this one) when `module` imports here,
    else `peers_dir()/venv/bin/python`.

    Raises:
        PluginError: `python` is not a file, or `module` is found nowhere, in one line naming the extra and the
            setup script.
    """
    if python:
        if not Path(python).is_file():
            raise PluginError(f"loader {loader}: python={python} is not a file; give the interpreter of an "
                              f"environment with {module} and dl installed.")
        return python
    if importlib.util.find_spec(module) is not None:
        return None
    candidate = peers_dir() / venv / "bin" / "python"
    if candidate.is_file():
        return str(candidate)
    raise PluginError(f"loader {loader} needs {module}, which is not installed here nor in {candidate.parent.parent}: "
                      f"pip install 'dl[{extra}]', or build the peers' environments with scripts/setup_peers.sh "
                      "(DL_PEERS_DIR names their folder).")


def import_peer(loader: str, module: str, extra: str):
    """Import `module` for loader `loader` (in the run's process).

    Raises:
        PluginError: it is not installed here, in one line naming the extra.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PluginError(f"loader {loader} needs {module.split('.')[0]} ({exc}): pip install 'dl[{extra}]', or run "
                          "it through `dl run`, which starts it in the peers' environment (scripts/setup_peers.sh)."
                          ) from None
