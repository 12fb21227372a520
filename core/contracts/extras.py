"""Optional dependencies: the extras of pyproject.toml (`plot`, `testing`, `train`) and the one-line error that says
how to install what an extra adds, right for how dl itself was installed."""

import importlib
import json
import sys
from importlib.metadata import distributions
from pathlib import Path


def _metadata() -> tuple[list[str], dict]:
    """(dl's requirements as its metadata states them, its PEP 610 `direct_url.json` or {}); a build's `dl.egg-info`
    in the working directory, which has no `direct_url.json`, is passed over for an installed distribution."""
    found: tuple[list[str], dict] = ([], {})
    for dist in distributions(name="dl"):
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            direct = {}
        found = (list(dist.requires or ()), direct)
        if direct:
            break
    return found


def editable_checkout() -> Path | None:
    """The source checkout dl is installed from in editable mode (`pip install -e`), or None (a wheel)."""
    direct = _metadata()[1]
    url = direct.get("url", "")
    if direct.get("dir_info", {}).get("editable") and url.startswith("file://"):
        return Path(url[len("file://"):])
    return None


def install_hint(extra: str) -> str:
    """The command that installs what `extra` adds: its requirements as dl's metadata states them, for this
    interpreter's pip (`dl[extra]` would name whatever distribution called `dl` the package index has, not this one);
    for an editable install also the checkout's own extra, by its path."""
    wanted = [r.split(";")[0].strip() for r in _metadata()[0] if f'extra == "{extra}"' in r]
    hint = f"{sys.executable} -m pip install {' '.join(repr(w) for w in wanted) or repr(extra)}"
    checkout = editable_checkout()
    return hint + (f" (or from the checkout: pip install -e '{checkout}[{extra}]')" if checkout else "")


def require(module: str, extra: str, purpose: str):
    """Import and return `module`, which only the extra `extra` installs.

    Raises:
        DlError: one line: what needs it (`purpose`), that it is missing, and the `install_hint`.
    """
    from .errors import DlError

    try:
        return importlib.import_module(module)
    except ImportError:
        root = module.split(".")[0]
        raise DlError(f"{purpose} needs {root}, which is not installed: {install_hint(extra)}") from None
