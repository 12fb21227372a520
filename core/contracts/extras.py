"""Optional dependencies: the extras of pyproject.toml (`plot`, `testing`, `train`) and the one-line error that names
the extra to install, worded for how dl itself was installed (an editable checkout or a wheel)."""

import importlib
import json
from importlib.metadata import distributions

from .errors import DlError


def install_hint(extra: str) -> str:
    """The pip command that adds `extra` to this installation of dl: `pip install -e '<checkout>[extra]'` for an
    editable install (PEP 610's `direct_url.json` says so), `pip install 'dl[extra]'` otherwise."""
    direct = {}
    for dist in distributions(name="dl"):  # a build's dl.egg-info in the working directory has no direct_url.json
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        if direct:
            break
    url = direct.get("url", "")
    if direct.get("dir_info", {}).get("editable") and url.startswith("file://"):
        return f"pip install -e '{url[len('file://'):]}[{extra}]'"
    return f"pip install 'dl[{extra}]'"


def require(module: str, extra: str, purpose: str):
    """Import and return `module`, which only the extra `extra` installs.

    Raises:
        DlError: one line: what needs it (`purpose`), that it is missing, and the `install_hint`.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        root = module.split(".")[0]
        raise DlError(f"{purpose} needs {root}, which is not installed: {install_hint(extra)}") from None
