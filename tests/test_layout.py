"""The tree shows the architecture. Each package's docstring names it and says what its modules may import
(`May import:`, and `For annotations only:` for names used under `if TYPE_CHECKING:`); every import is
checked against it, function-level ones included, and no two modules import each other in a circle once
every import (module level, function level, `TYPE_CHECKING`) is counted. `import dl` and the contracts
load no torch."""

import ast
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = {"dl": REPO / "core", "dl.plugins": REPO / "plugins", "dl.cli": REPO / "cli"}
DOTTED = re.compile(r"`(dl(?:\.\w+)*)`")
HEADINGS = ("May import:", "For annotations only:")


@cache
def modules() -> dict[str, Path]:
    """Every module of the `dl` package: `{dotted name: file}`."""
    out = {}
    for package, folder in ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def packages() -> list[str]:
    return sorted(m for m, p in modules().items() if p.name == "__init__.py")


@cache
def imports(module: str) -> tuple[tuple[str, bool], ...]:
    """The dl modules `module` imports, each with whether the import is for annotations only
    (under `if TYPE_CHECKING:`). `from package import name` counts as importing `package.name` when that is
    a module, else `package`."""
    path = modules()[module]
    tree = ast.parse(path.read_text())
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base for a in node.names]
        found += [(t, id(node) in typing_only) for t in targets if t == "dl" or t.startswith("dl.")]
    return tuple(sorted(set(found)))


def docstring(package: str) -> str:
    return ast.get_docstring(ast.parse(modules()[package].read_text())) or ""


def rule(package: str, heading: str) -> list[str] | None:
    """The dotted names a package's docstring lists after `heading` (up to the next blank line), or None when
    it has no such paragraph."""
    doc = docstring(package)
    if heading not in doc:
        return None
    paragraph = doc[doc.index(heading) + len(heading):].split("\n\n")[0]
    for other in HEADINGS:  # a paragraph ends where another heading starts
        if other != heading and other in paragraph:
            paragraph = paragraph[:paragraph.index(other)]
    return DOTTED.findall(paragraph) if "anything in dl" not in paragraph else ["dl"]


def governing(module: str) -> str:
    """The innermost package above `module` whose docstring states `May import:`."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        is_package = candidate in modules() and modules()[candidate].name == "__init__.py"
        if is_package and rule(candidate, "May import:") is not None:
            return candidate
    return "dl"


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_are_those_the_package_docstring_allows(module):
    package = governing(module)
    allowed = [package, *(rule(package, "May import:") or [])]
    annotations = rule(package, "For annotations only:") or []
    bad = [(name, typing) for name, typing in imports(module)
           if name != "dl" and not within(name, allowed) and not (typing and within(name, annotations))]
    assert not bad, f"{module} imports {bad} (as (module, for annotations only)); {package}'s docstring allows " \
                    f"{allowed[1:]}, for annotations {annotations}"


def test_a_plugin_imports_no_other_plugin():
    for module in modules():
        if module.startswith("dl.plugins."):
            own = ".".join(module.split(".")[:3])
            others = [n for n, _ in imports(module) if n.startswith("dl.plugins.") and not within(n, [own])]
            assert not others, f"{module} imports another plugin: {others}"


def test_no_module_imports_itself_through_others():
    graph = {m: [n for n, _ in imports(m) if n in modules() and n != m] for m in modules()}
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles (every import counted, TYPE_CHECKING included): " + \
        "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module (the cycles)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_the_rules_are_read_paragraph_by_paragraph():
    assert rule("dl.contracts", "May import:") == []
    assert rule("dl.contracts", "For annotations only:") == ["dl.format"]
    assert rule("dl.cli", "May import:") == ["dl"]


def test_the_cycle_check_finds_a_cycle():
    assert strongly_connected({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["c", "b", "a"]]
    assert strongly_connected({"a": ["b"], "b": []}) == []


@pytest.mark.parametrize("package", packages())
def test_every_package_says_what_it_holds(package):
    doc = docstring(package)
    if package.startswith("dl.plugins."):  # a plugin package starts with what it registers: "Loader `map`: ..."
        assert doc, f"{package} has no docstring"
    else:
        assert doc.startswith(f"{package}:"), f"{package}'s docstring should start by naming it: {doc[:60]!r}"


@pytest.mark.parametrize("package", [p for p in packages() if p.count(".") == 1])
def test_every_layer_says_what_it_may_import(package):
    assert rule(package, "May import:") is not None, f"{package}'s docstring does not say what it may import"


def test_dl_top_level_holds_only_packages():
    loose = sorted(p.name for p in ROOTS["dl"].glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at dl's top level (put them in the package that says what they are): {loose}"


def test_import_dl_and_the_contracts_load_no_torch():
    contracts = [m for m in modules() if within(m, ["dl.contracts"])]
    code = ("import sys, dl\n"
            f"for name in {contracts!r}: __import__(name)\n"
            "dl.DatasetMeta, dl.Source, dl.Decoder, dl.LoaderConfig, dl.hookimpl, dl.Loader, dl.DlError\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"torch modules loaded: {out.strip()[:300]}"
