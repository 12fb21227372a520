"""Tests for the plugin host: built-ins through entry points, the registry's rules (clashes, unknown and
invalid names), load errors, DL_DISABLE_PLUGINS / DL_STRICT_PLUGINS, and the example third-party plugin
`examples/dl-example-zip` installed and run end to end."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from importlib.metadata import EntryPoint, distributions, entry_points, version
from pathlib import Path

import pluggy
import pytest
import torch
import torch.utils.data

from dl.config import LoaderConfig
from dl.errors import DlError, PluginError
from dl.metadata import DatasetMeta
from dl.plugins_manager import load_plugins
from dl.sample_dataset import SampleDatasetConfig, read_frame_code, write_sample_dataset

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "dl-example-zip"
BUILTINS = {("source", "local"): "dl.plugins.local_source", ("loader", "map"): "dl.plugins.map_loader",
            ("loader", "pool"): "dl.plugins.pool_loader", ("decoder", "cpu"): "dl.plugins.cpu_decoder",
            ("scheduler", "local"): "dl.plugins.local_scheduler"}
CAMERA = "observation.images.cam0"


# --- helpers -------------------------------------------------------------------------------------------

def run_dl(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`dl ARGS` in a fresh interpreter (the plugin set is loaded once per process)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("DL_DISABLE_PLUGINS", "DL_STRICT_PLUGINS")}
    full_env.update(COLUMNS="200", NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-c", "from dl.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=full_env, timeout=timeout)


def table_rows(output: str) -> list[list[str]]:
    """The cells of each row of a rich table printed to a pipe."""
    return [[c.strip() for c in re.split(r"[│┃|]", line)[1:-1]] for line in output.splitlines()
            if len(re.findall(r"[│┃|]", line)) >= 2]


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """`plugin_module(body) -> name`: write a plugin module with a unique name and make it importable."""
    folder = tmp_path / "plugin_modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    names = []

    def write(body: str) -> str:
        name = f"dltest_{uuid.uuid4().hex[:10]}"
        (folder / f"{name}.py").write_text("from dl.hookspecs import hookimpl\n\n" + textwrap.dedent(body))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def ep(name: str, module: str) -> EntryPoint:
    return EntryPoint(name, module, group="dl")


def fake_distribution(site: Path, dist: str, dist_version: str, eps: dict[str, str]) -> list[EntryPoint]:
    """Write `<dist>-<version>.dist-info` (METADATA + entry_points.txt) into `site`; return its `dl` entry
    points, read back through importlib.metadata so each one knows its distribution."""
    info = site / f"{dist.replace('-', '_')}-{dist_version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {dist_version}\n")
    (info / "entry_points.txt").write_text("[dl]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    (found,) = [d for d in distributions(path=[str(site)]) if d.metadata["Name"] == dist]
    return [e for e in found.entry_points if e.group == "dl"]


def source_plugin(*names: str) -> str:
    """Body of a plugin module registering sources `names` (factory: a function with a docstring)."""
    calls = "".join(f"    register({n!r}, factory)\n" for n in names)
    return f'def factory(root):\n    """made by a test"""\n\n\n@hookimpl\ndef register_sources(register):\n{calls}'


# --- built-ins -----------------------------------------------------------------------------------------

def test_builtins_come_from_dl_entry_points():
    mine = {e.name: e.value for e in entry_points(group="dl") if e.dist and e.dist.name == "dl"}
    assert mine == {"local_source": "dl.plugins.local_source", "map_loader": "dl.plugins.map_loader",
                    "pool_loader": "dl.plugins.pool_loader", "cpu_decoder": "dl.plugins.cpu_decoder",
                    "local_scheduler": "dl.plugins.local_scheduler"}


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
    kinds = [p["kind"] for p in out["plugins"]]
    assert kinds == sorted(kinds, key=["source", "loader", "decoder", "scheduler"].index)


@pytest.mark.slow
def test_dl_plugins_table_lists_builtins():
    proc = run_dl("plugins")
    assert proc.returncode == 0, proc.stderr
    rows = {(r[0], r[1]): r for r in table_rows(proc.stdout) if len(r) == 5}
    assert rows[("kind", "name")] == ["kind", "name", "distribution", "version", "description"]
    for key in BUILTINS:
        assert rows[key][2:4] == ["dl", version("dl")]
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
    with pytest.raises(PluginError, match=r"decoder plugin 'liar' from unknown \? returned dict, not a "
                                          r"dl\.decoder\.Decoder"):
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


# --- the example plugin: examples/dl-example-zip -------------------------------------------------------

@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """examples/dl-example-zip pip-installed into a fresh folder (built from a copy: pip builds in tree)."""
    tmp = tmp_path_factory.mktemp("example")
    src = shutil.copytree(EXAMPLE, tmp / "src", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(tmp / "site"), str(src)], check=True, capture_output=True, timeout=300)
    return tmp / "site"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_sample_dataset(tmp_path_factory.mktemp("ds") / "ds", SampleDatasetConfig(
        episodes=4, frames_per_episode=(20, 30), cameras=1, episodes_per_file=2, codec="h264"))


def zip_folder(folder: Path, archive: Path, prefix: str = "", compression=zipfile.ZIP_DEFLATED) -> Path:
    """Zip every file under `folder` as `prefix/relative/path`."""
    with zipfile.ZipFile(archive, "w", compression) as zf:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                zf.write(f, f"{prefix}/{f.relative_to(folder)}" if prefix else str(f.relative_to(folder)))
    return archive


@pytest.fixture
def with_example(example_site, monkeypatch, tmp_path):
    """The registry of the built-ins plus the installed example, loaded in this process."""
    monkeypatch.syspath_prepend(str(example_site))
    monkeypatch.setenv("DL_CACHE_DIR", str(tmp_path / "cache"))
    registry = load_plugins(eps=list(entry_points(group="dl")), strict=True).registry  # now finds the example
    assert registry.get("source", "zip").distribution == "dl-example-zip"
    return registry


@pytest.mark.slow
def test_example_is_listed_by_dl_plugins(example_site):
    proc = run_dl("plugins", "--json", env={"PYTHONPATH": str(example_site)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (zip_entry,) = [p for p in out["plugins"] if p["name"] == "zip"]
    assert zip_entry == {"kind": "source", "name": "zip", "distribution": "dl-example-zip", "version": "0.1.0",
                         "module": "dl_example_zip", "description": zip_entry["description"]}
    assert "zip" in zip_entry["description"] and out["errors"] == []
    assert {(p["kind"], p["name"]) for p in out["plugins"]} == {*BUILTINS, ("source", "zip")}


@pytest.mark.slow
def test_example_runs_the_benchmark(example_site, dataset, tmp_path):
    archive = zip_folder(dataset, tmp_path / "ds.zip", prefix="ds")
    out_dir = tmp_path / "out"
    proc = run_dl("run", "--source", "zip", "--root", str(archive), "--duration", "1", "--num-workers", "0",
                  "--warmup-batches", "1", "--single-proc-samples", "4", "--out-dir", str(out_dir),
                  env={"PYTHONPATH": str(example_site), "DL_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result_file,) = out_dir.glob("*.json")
    result = json.loads(result_file.read_text())
    assert result["status"] == "ok"
    assert result["samples_per_s"] > 0 and result["window_samples"] > 0
    assert result["config"]["source"] == "zip"
    assert result["dataset"]["root"] == f"zip://{archive}!/ds"
    assert (result["dataset"]["episodes"], result["dataset"]["cameras"]) == (4, [CAMERA])


@pytest.mark.parametrize("prefix", ["", "ds", "nested/deeper"])
def test_example_finds_the_dataset_root_and_decodes_through_the_zip(with_example, dataset, tmp_path, prefix):
    archive = zip_folder(dataset, tmp_path / "ds.zip", prefix=prefix)
    source = with_example.create("source", "zip", str(archive))
    assert type(source).__name__ == "ZipSource"
    assert (source.root, source.name, source.url) == (prefix, "zip", f"zip://{archive}!" + f"/{prefix}" * bool(prefix))
    meta = DatasetMeta.load(source)
    assert len(meta.episodes) == 4 and meta.video_keys == [CAMERA]
    decoder = with_example.create("decoder", "cpu")
    zipped = with_example.create("loader", "map", meta, decoder, LoaderConfig(image_dtype="uint8"))
    local_meta = DatasetMeta.load(with_example.create("source", "local", str(dataset)))
    local = with_example.create("loader", "map", local_meta, decoder, LoaderConfig(image_dtype="uint8"))
    assert len(zipped) == len(local) == meta.total_frames
    for i in (0, 7, len(zipped) - 1, 3):  # a backward seek at the end
        sample = zipped[i]
        assert read_frame_code(sample[CAMERA]) == (int(sample["index"]), 0)
        assert torch.equal(sample[CAMERA], local[i][CAMERA])
        assert torch.equal(sample["action"], local[i]["action"])


def test_example_is_safe_in_forked_dataloader_workers(with_example, dataset, tmp_path):
    # Forked workers inherit the parent's open archive (and its file offset); the source must reopen it.
    archive = zip_folder(dataset, tmp_path / "ds.zip")
    meta = DatasetMeta.load(with_example.create("source", "zip", str(archive)))
    ds = with_example.create("loader", "map", meta, with_example.create("decoder", "cpu"),
                             LoaderConfig(image_dtype="uint8"))
    assert read_frame_code(ds[0][CAMERA]) == (0, 0)  # the parent reads before the fork, as the benchmark does
    seen = []
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                         multiprocessing_context="fork")
    for _ in range(2):
        for batch in loader:
            for frame, index in zip(batch[CAMERA], batch["index"].tolist(), strict=True):
                assert read_frame_code(frame) == (index, 0)
                seen.append(index)
    assert sorted(seen) == sorted(list(range(len(ds))) * 2)


def test_example_fingerprint_changes_with_content(with_example, dataset, tmp_path):
    archive = zip_folder(dataset, tmp_path / "ds.zip")
    before = with_example.create("source", "zip", str(archive)).fingerprint("meta/info.json")
    text = (dataset / "meta" / "info.json").read_text()
    robot = json.loads(text)["robot_type"]
    copy = shutil.copytree(dataset, tmp_path / "edited")
    (copy / "meta" / "info.json").write_text(text.replace(f'"{robot}"', f'"{"x" * len(robot)}"'))  # same size
    assert (copy / "meta" / "info.json").stat().st_size == (dataset / "meta" / "info.json").stat().st_size
    edited = zip_folder(copy, tmp_path / "edited.zip")
    after = with_example.create("source", "zip", str(edited)).fingerprint("meta/info.json")
    assert before != after  # the member's CRC-32 is part of the info fsspec's ukey hashes


def test_example_errors_name_the_archive_and_the_fix(with_example, dataset, tmp_path):
    def factory(*args, **kwargs):
        return with_example.create("source", "zip", *args, **kwargs)

    with pytest.raises(DlError, match=r"--root .*nope\.zip: no such file\. Give a \.zip of a LeRobot v3\.0"):
        factory(str(tmp_path / "nope.zip"))
    (tmp_path / "fake.zip").write_text("not a zip")
    with pytest.raises(DlError, match=r"fake\.zip: not a zip archive"):
        factory(str(tmp_path / "fake.zip"))
    empty = zip_folder(dataset / "data", tmp_path / "data-only.zip")
    with pytest.raises(DlError, match=rf"{re.escape(str(empty))} holds no meta/info.json in any folder"):
        factory(str(empty))
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as zf:
        for prefix in ("a", "b"):
            for f in sorted(dataset.rglob("*")):
                if f.is_file():
                    zf.write(f, f"{prefix}/{f.relative_to(dataset)}")
    with pytest.raises(DlError, match=r"holds 2 datasets \(a, b\); pick one with --source-option inner=DIR"):
        factory(str(two))
    assert factory(str(two), inner="b/").root == "b"
    with pytest.raises(DlError, match=r"holds no c/meta/info.json"):
        factory(str(two), inner="c")
