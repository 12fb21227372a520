"""Meta-tests (as datasette has): every hook spec and every built-in plugin, with its options, is
documented in docs/plugins.md."""

import inspect
import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from dl.contracts import hookspecs
from dl.host.manager import load_plugins

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
HOOKS = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("register_")]
BUILTINS = load_plugins(eps=[e for e in entry_points(group="dl") if e.dist and e.dist.name == "dl"],
                        strict=True).registry.entries()


def test_the_hooks_are_the_four_kinds():
    assert sorted(HOOKS) == ["register_decoders", "register_loaders", "register_schedulers", "register_sources"]


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_section(hook):
    assert f"\n## `{hook}`\n" in DOCS, f"docs/plugins.md has no '## `{hook}`' section"


@pytest.mark.parametrize("entry", BUILTINS, ids=lambda e: f"{e.kind}-{e.name}")
def test_every_builtin_is_in_the_table_with_its_options(entry):
    row = re.search(rf"^\| {entry.kind} \| `{entry.name}` \| `{re.escape(entry.module)}` \| (.*?) \|", DOCS, re.M)
    assert row, f"docs/plugins.md's built-in table has no row for {entry.kind} {entry.name} ({entry.module})"
    documented = row.group(1)
    for option in entry.options.options:
        assert f"`{option}`" in documented, f"{entry.kind} {entry.name}: option {option} is not documented"
    if not entry.options.options:
        assert documented == "none"


def test_the_table_labels_in_docs_benchmark_md_are_the_ones_dl_run_prints():
    from dl.cli.labels import labels_markdown

    text = (Path(__file__).resolve().parents[1] / "docs" / "benchmark.md").read_text()
    section = re.search(r"^#+ Labels in the table\n<!-- generated: [^\n]*-->\n(.*?)\n<!-- end of generated labels -->",
                        text, re.M | re.S)
    assert section, "docs/benchmark.md has no generated 'Labels in the table' section"
    assert section.group(1) == labels_markdown(), ("docs/benchmark.md's labels differ from the table's: paste the "
                                                   "output of dl.cli.labels.labels_markdown() between the markers")
