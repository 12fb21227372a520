"""The tree shows the architecture: each package's docstring says what lives there and what it may import,
and no module imports what its package may not (imports under `if TYPE_CHECKING:` are for annotations
only and do not count)."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"dl": REPO / "core", "dl.plugins": REPO / "plugins", "dl.cli": REPO / "cli"}
SUBPACKAGES = ("dl.format", "dl.bench", "dl.testing", "dl.plugins", "dl.cli")

FORBIDDEN = {
    "dl": ("dl.bench", "dl.testing", "dl.plugins", "dl.cli"),
    "dl.format": ("dl.bench", "dl.testing", "dl.plugins", "dl.cli"),
    "dl.bench": ("dl.plugins", "dl.cli", "dl.testing.loader_suite", "dl.testing.source_suite",
                 "dl.testing.decoder_suite"),
    "dl.testing": ("dl.bench", "dl.plugins", "dl.cli"),
    "dl.plugins": ("dl.bench", "dl.testing", "dl.cli"),
    "dl.cli": (),
}
"""Per layer, the packages its modules must not import (a plugin reaches other plugins only through the
registry; the benchmark uses only the synthetic generator of dl.testing)."""


def modules():
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            yield (name[: -len(".__init__")] if name.endswith(".__init__") else name), path


def layer(module: str) -> str:
    return next((p for p in SUBPACKAGES if module == p or module.startswith(p + ".")), "dl")


def runtime_imports(module: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
                found += [target] if node.module else [f"{base}.{a.name}" for a in node.names]
            else:
                found.append(node.module)
    return [m for m in found if m == "dl" or m.startswith("dl.")]


@pytest.mark.parametrize(("module", "path"), list(modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_imports_respect_the_layers(module, path):
    bad = [m for m in runtime_imports(module, path)
           if any(m == f or m.startswith(f + ".") for f in FORBIDDEN[layer(module)])]
    if layer(module) == "dl.plugins":  # a plugin package imports only itself among plugins
        own = ".".join(module.split(".")[:3])
        bad += [m for m in runtime_imports(module, path) if m.startswith("dl.plugins.") and not m.startswith(own)]
    assert not bad, f"{module} ({layer(module)}) imports {bad}"


FOLDERS = {"dl": REPO / "core", "dl.format": REPO / "core" / "format", "dl.bench": REPO / "core" / "bench",
           "dl.testing": REPO / "core" / "testing", "dl.plugins": REPO / "plugins", "dl.cli": REPO / "cli"}


@pytest.mark.parametrize("package", FOLDERS)
def test_every_package_says_what_it_holds_and_may_import(package):
    doc = ast.get_docstring(ast.parse((FOLDERS[package] / "__init__.py").read_text())) or ""
    assert doc.startswith(f"{package}:"), f"{package}'s docstring should start by naming it: {doc[:60]!r}"
    assert "May import:" in doc, f"{package}'s docstring does not say what it may import"
