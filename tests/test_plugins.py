"""Tests for the plugin host: built-ins through entry points, the registry's rules (clashes, unknown and
invalid names), load errors, DL_DISABLE_PLUGINS / DL_STRICT_PLUGINS (the example plugin: test_example_plugin.py)."""

import json
import sys
import textwrap
import uuid
from importlib.metadata import EntryPoint, entry_points, version

import pluggy
import pytest
from plugin_helpers import BUILTINS, fake_distribution, run_dl

from dl.contracts.errors import PluginError
from dl.host.manager import load_plugins

# --- helpers -------------------------------------------------------------------------------------------

@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """`plugin_module(body) -> name`: write a plugin module with a unique name and make it importable."""
    folder = tmp_path / "plugin_modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    names = []

    def write(body: str) -> str:
        name = f"dltest_{uuid.uuid4().hex[:10]}"
        (folder / f"{name}.py").write_text("from dl.contracts.hookspecs import hookimpl\n\n" + textwrap.dedent(body))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def ep(name: str, module: str) -> EntryPoint:
    return EntryPoint(name, module, group="dl")


def source_plugin(*names: str) -> str:
    """Body of a plugin module registering sources `names` (factory: a function with a docstring)."""
    calls = "".join(f"    register({n!r}, factory)\n" for n in names)
    return f'def factory(root):\n    """made by a test"""\n\n\n@hookimpl\ndef register_sources(register):\n{calls}'


# --- built-ins -----------------------------------------------------------------------------------------

def test_builtins_come_from_dl_entry_points():
    mine = {e.name: e.value for e in entry_points(group="dl") if e.dist and e.dist.name == "dl"}
    assert mine == {"local_source": "dl.plugins.local_source", "hub_source": "dl.plugins.remote.hub",
                    "bucket_source": "dl.plugins.remote.bucket", "map_loader": "dl.plugins.map",
                    "pool_loader": "dl.plugins.pool", "cpu_decoder": "dl.plugins.cpu_decoder",
                    "nvdec_decoder": "dl.plugins.nvdec_decoder",
                    "local_scheduler": "dl.plugins.local_scheduler", "slurm_scheduler": "dl.plugins.slurm",
                    "peer_loaders": "dl.plugins.peers"}


@pytest.mark.slow
def test_dl_plugins_json_lists_builtins():
    proc = run_dl("plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["errors"] == []
    got = {(p["kind"], p["name"]): p for p in out["plugins"]}
    for key, module in BUILTINS.items():
        assert got[key]["distribution"] == "dl"
        assert got[key]["version"] == version("dl")
        assert got[key]["module"] == module
        assert got[key]["description"]
    pool = {o["name"]: o for o in got[("loader", "pool")]["options"]}
    assert {k: (o["default"], o["required"]) for k, o in pool.items()} == {
        "episode_pool_size": (16, False), "drop_last": (False, False), "decode_budget": ("256M", False),
        "decode_chunk_frames": ("auto", False)}
    assert "episodes open at once per consumer" in pool["episode_pool_size"]["help"]
    assert [(o["name"], o["default"]) for o in got[("loader", "map")]["options"]] == [("tabular_cache_bytes", "16G")]
    cpu = {o["name"]: o["default"] for o in got[("decoder", "cpu")]["options"]}
    assert cpu == {"cache_size": None, "cache_bytes": 512_000_000, "num_threads": 1, "seek_mode": "auto",
                   "camera_threads": "auto", "resize": None, "resize_depth": False}
    kinds = [p["kind"] for p in out["plugins"]]
    assert kinds == sorted(kinds, key=["source", "loader", "decoder", "scheduler"].index)


def test_dl_plugins_at_80_columns_lists_builtins_and_splits_no_option():
    """Written to a pipe at 80 columns (a file, a narrow terminal): a block per plugin, wrapped at spaces, so every
    option reads whole (`cache_bytes=8000000000`, not `cache_bytes=8` / `000000000`)."""
    proc = run_dl("plugins", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "…" not in proc.stdout
    words = {w.rstrip(",") for line in lines for w in line.split()}
    for key in BUILTINS:
        heading = next(line for line in lines if line.startswith(f"{key[0]} {key[1]} ("))
        assert heading.startswith(f"{key[0]} {key[1]} (dl {version('dl')}): ")
    registry = load_plugins(eps=[e for e in entry_points(group="dl") if e.dist and e.dist.name == "dl"],
                            strict=True).registry
    for entry in registry.entries():
        for option in entry.options.options:
            assert str(option) in words, f"{entry.kind} {entry.name}: {option} is split or missing"
    assert "cache_bytes=8000000000" in words and "decode_chunk_frames='auto'" in words
    assert "failed to load" not in proc.stdout


# --- the registry, with inline plugins -----------------------------------------------------------------

def test_hooks_register_with_the_providing_distribution(tmp_path, plugin_module):
    mod = plugin_module(source_plugin("alpha", "beta") + textwrap.dedent('''
        @hookimpl
        def register_decoders(register):
            register("fake", factory, "an explicit description")
        '''))
    eps = fake_distribution(tmp_path / "site", "dl-fake", "1.2.3", {"fake": mod})
    plugins = load_plugins(eps=eps, strict=True)
    assert plugins.errors == []
    assert [(p.name, p.distribution, p.version) for p in plugins.loaded] == [("fake", "dl-fake", "1.2.3")]
    entries = [(e.kind, e.name, e.distribution, e.version, e.module, e.description)
               for e in plugins.registry.entries()]
    assert entries == [("source", "alpha", "dl-fake", "1.2.3", mod, "made by a test"),
                       ("source", "beta", "dl-fake", "1.2.3", mod, "made by a test"),
                       ("decoder", "fake", "dl-fake", "1.2.3", mod, "an explicit description")]
    assert plugins.registry.get("source", "beta").factory.__module__ == mod


def test_entry_point_without_distribution_is_unknown(plugin_module):
    plugins = load_plugins(eps=[ep("inline", plugin_module(source_plugin("inline")))], strict=True)
    entry = plugins.registry.get("source", "inline")
    assert (entry.distribution, entry.version) == ("unknown", "?")


def test_name_clash_names_both_distributions(tmp_path, plugin_module):
    mod_a, mod_b = plugin_module(source_plugin("dup")), plugin_module(source_plugin("dup"))
    eps = (fake_distribution(tmp_path / "a", "alpha-dist", "1.0", {"a": mod_a})
           + fake_distribution(tmp_path / "b", "beta-dist", "2.0", {"b": mod_b}))
    with pytest.raises(PluginError) as err:
        load_plugins(eps=eps, strict=False)  # a clash is fatal even when load errors are not
    message = str(err.value)
    assert "source plugin name 'dup' is registered twice" in message
    assert f"alpha-dist 1.0 ({mod_a})" in message and f"beta-dist 2.0 ({mod_b})" in message
    assert f"DL_DISABLE_PLUGINS={mod_b}" in message


def test_name_clash_with_a_builtin(tmp_path, plugin_module):
    mod = plugin_module(source_plugin("local"))
    eps = [*entry_points(group="dl"), *fake_distribution(tmp_path / "site", "dl-evil", "0.1", {"evil": mod})]
    with pytest.raises(PluginError, match=rf"'local' is registered twice: by dl {version('dl')} "
                                          rf"\(dl\.plugins\.local_source\) and by dl-evil 0\.1 \({mod}\)"):
        load_plugins(eps=eps)


def test_disable_blocks_a_clashing_plugin_before_import(tmp_path, plugin_module, monkeypatch):
    mod_a = plugin_module(source_plugin("dup"))
    mod_b = plugin_module(source_plugin("dup") + "raise RuntimeError('must not be imported')\n")
    eps = (fake_distribution(tmp_path / "a", "alpha-dist", "1.0", {"a": mod_a})
           + fake_distribution(tmp_path / "b", "beta-dist", "2.0", {"b": mod_b}))
    for blocked in (mod_b, "b", f" other, {mod_b} "):  # by module, by entry-point name, in a list
        monkeypatch.setenv("DL_DISABLE_PLUGINS", blocked)
        plugins = load_plugins(eps=eps, strict=True)
        assert plugins.registry.get("source", "dup").distribution == "alpha-dist"
        assert [p.name for p in plugins.loaded] == ["a"] and plugins.errors == []
    assert mod_b not in sys.modules


def test_unknown_name_lists_registered_names(plugin_module):
    plugins = load_plugins(eps=[ep("p", plugin_module(source_plugin("zeta", "alpha")))], strict=True)
    with pytest.raises(PluginError) as err:
        plugins.registry.get("source", "nope")
    assert "unknown source 'nope'; registered sources: alpha, zeta." in str(err.value)
    assert "dl plugins" in str(err.value)
    with pytest.raises(PluginError, match="unknown loader 'map'; registered loaders: none"):
        plugins.registry.get("loader", "map")


def test_plugin_failing_to_import_is_recorded_not_fatal(plugin_module, monkeypatch):
    monkeypatch.delenv("DL_STRICT_PLUGINS", raising=False)
    good = plugin_module(source_plugin("good"))
    bad = plugin_module("raise RuntimeError('boom at import')\n")
    eps = [ep("bad", bad), ep("missing", "dl_no_such_module_xyz"), ep("good", good)]
    plugins = load_plugins(eps=eps)
    assert plugins.errors == ["unknown: bad: RuntimeError: boom at import",
                              "unknown: missing: ModuleNotFoundError: No module named 'dl_no_such_module_xyz'"]
    assert plugins.registry.names("source") == ["good"]
    assert [p.name for p in plugins.loaded] == ["good"]


def test_plugin_failing_to_import_is_fatal_when_strict(plugin_module, monkeypatch):
    bad = plugin_module("raise RuntimeError('boom at import')\n")
    with pytest.raises(PluginError, match="plugin bad from unknown \\? failed to load: boom at import"):
        load_plugins(eps=[ep("bad", bad)], strict=True)
    monkeypatch.setenv("DL_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="boom at import"):
        load_plugins(eps=[ep("bad", bad)])
    assert load_plugins(eps=[ep("bad", bad)], strict=False).errors  # the argument wins over the env


@pytest.mark.parametrize("call, problem", [
    ('register("zip-source", factory)', "'zip-source': names are identifiers"),
    ('register("", factory)', "'': names are identifiers"),
    ('register("two words", factory)', "'two words': names are identifiers"),
    ("register(3, factory)", "3: names are identifiers"),
    ('register("fine", "not callable")', "'fine' with a non-callable"),
])
def test_invalid_registrations_are_rejected(plugin_module, monkeypatch, call, problem):
    monkeypatch.delenv("DL_STRICT_PLUGINS", raising=False)
    mod = plugin_module(f"def factory():\n    pass\n\n\n@hookimpl\ndef register_sources(register):\n    {call}\n")
    plugins = load_plugins(eps=[ep("p", mod)])  # recorded, not fatal: the host keeps working
    assert plugins.errors == [f"unknown: p: PluginError: unknown ({mod}) registers source {problem}."]
    assert plugins.registry.names("source") == []
    with pytest.raises(PluginError) as err:
        load_plugins(eps=[ep("p", mod)], strict=True)
    assert str(err.value) == f"plugin p from unknown ? failed to load: unknown ({mod}) registers source {problem}."


def test_create_rejects_an_object_of_the_wrong_kind(plugin_module):
    mod = plugin_module("@hookimpl\ndef register_decoders(register):\n    register('liar', dict, 'returns a dict')\n")
    registry = load_plugins(eps=[ep("liar", mod)], strict=True).registry
    with pytest.raises(PluginError, match=r"decoder plugin 'liar' from unknown \? returned dict, which is not a dl "
                                          r"decoder: not a dl\.contracts\.decoder\.Decoder"):
        registry.create("decoder", "liar")


def test_hookimpl_with_a_typo_is_rejected(plugin_module, monkeypatch):
    monkeypatch.delenv("DL_STRICT_PLUGINS", raising=False)
    mod = plugin_module("@hookimpl\ndef register_source(register):\n    register('x', print)\n")
    good = plugin_module(source_plugin("good"))
    plugins = load_plugins(eps=[ep("typo", mod), ep("good", good)])  # reported; the other plugins still load
    assert len(plugins.errors) == 1 and plugins.errors[0].startswith("unknown: typo: PluginValidationError:")
    assert "unknown hook 'register_source'" in plugins.errors[0] and mod in plugins.errors[0]
    assert plugins.registry.names("source") == ["good"]
    with pytest.raises(PluginError) as err:
        load_plugins(eps=[ep("typo", mod)], strict=True)
    assert isinstance(err.value.__cause__, pluggy.PluginValidationError)


def test_hookimpl_with_a_wrong_argument_is_a_load_error(plugin_module):
    mod = plugin_module("@hookimpl\ndef register_sources(reg):\n    reg('x', print)\n")
    plugins = load_plugins(eps=[ep("argtypo", mod)], strict=False)
    assert len(plugins.errors) == 1
    assert plugins.errors[0].startswith("unknown: argtypo: PluginValidationError:")
    assert "reg" in plugins.errors[0] and plugins.registry.names("source") == []


@pytest.mark.slow
def test_dl_plugins_reports_broken_plugins(tmp_path):
    site = tmp_path / "site"
    fake_distribution(site, "dl-broken", "0.3", {"broken": "dl_broken_plugin"})
    (site / "dl_broken_plugin.py").write_text("raise ImportError('needs libfoo')\n")
    env = {"PYTHONPATH": str(site)}
    listing = json.loads(run_dl("plugins", "--json", env=env).stdout)
    assert listing["errors"] == ["dl-broken: broken: ImportError: needs libfoo"]
    assert {(p["kind"], p["name"]) for p in listing["plugins"]} == set(BUILTINS)  # the host still works
    table = run_dl("plugins", env=env)
    assert table.returncode == 0 and "failed to load: dl-broken: broken: ImportError: needs libfoo" in table.stdout
    strict = run_dl("plugins", env={**env, "DL_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2
    assert "plugin broken from dl-broken 0.3 failed to load: needs libfoo" in strict.stderr
    disabled = json.loads(run_dl("plugins", "--json", env={**env, "DL_DISABLE_PLUGINS": "broken"}).stdout)
    assert disabled["errors"] == []
