"""Every plugin kind takes its options the same way: keyword arguments of its factory, read from the
signature (defaults) and the docstring (help), checked before anything is built, listed by `dl plugins`."""

import inspect
import re
import typing
from typing import Literal, Optional, Union

import pytest
from plugin_helpers import run_dl

import dl
from dl.contracts.errors import PluginError
from dl.host.options import REQUIRED, PluginOption, docstring_args, factory_options


def loader_factory(meta, decoder, config, pool: int = 4, *, label: str = "x", mode):
    """A loader.

    Args:
        meta, decoder, config: as every loader.
        pool: how many episodes stay open; a longer
            explanation on a second line.
        label: a name.
    """


class Decoder:
    """A decoder class.

    Args:
        threads (int): FFmpeg threads.
    """

    def __init__(self, threads=1, **rest):
        pass


def test_options_come_from_the_signature_after_the_kinds_positionals():
    options = factory_options("loader", loader_factory)
    assert [(o.name, o.default) for o in options.options] == [("pool", 4), ("label", "x"), ("mode", REQUIRED)]
    assert options.options[0].help == "how many episodes stay open; a longer explanation on a second line."
    assert options.missing({"pool": 1}) == ["mode"] and options.unknown({"nope": 1}) == ["nope"]
    assert options.describe() == "pool=4, label='x', mode (required)"


def test_a_factory_with_kwargs_accepts_any_option():
    options = factory_options("decoder", Decoder)
    assert options.open and options.unknown({"anything": 1}) == [] and options.names() == ["threads"]
    assert docstring_args(Decoder) == {"threads": "FFmpeg threads."}


def test_a_factory_that_cannot_take_the_positionals_is_refused():
    with pytest.raises(TypeError, match="a source factory takes root positional argument"):
        factory_options("source", lambda: None)


def test_make_dataset_refuses_an_option_the_loader_does_not_take(small_dataset):
    with pytest.raises(PluginError, match=r"loader 'map' \(dl\) does not take option episode_pool_size\. It accepts: "
                                          r"tabular_cache_bytes='16G' \(set them with --loader-option KEY=VALUE\)\."):
        dl.make_dataset(str(small_dataset), loader="map", loader_options={"episode_pool_size": 8})
    with pytest.raises(PluginError, match=r"It accepts: episode_pool_size=16, drop_last=False"):
        dl.make_dataset(str(small_dataset), loader="pool", loader_options={"pool_size": 8})


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_dl_run_refuses_a_pool_option_for_map_before_running(small_dataset, tmp_path):
    proc = run_dl("run", "--root", str(small_dataset), "--loader", "map", "--loader-option", "episode_pool_size=8",
                  "--out-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert ("loader 'map' (dl) does not take option episode_pool_size. It accepts: tabular_cache_bytes='16G'"
            in proc.stderr)
    assert not (tmp_path / "out").exists(), "nothing may run or be written"


def test_dl_run_refuses_an_unknown_decoder_option(small_dataset, tmp_path):
    proc = run_dl("run", "--root", str(small_dataset), "--decoder-option", "threads=2", "--out-dir", str(tmp_path))
    assert proc.returncode == 2
    assert ("decoder 'cpu' (dl) does not take option threads. It accepts: cache_size=None, cache_bytes=512000000, "
            "num_threads=1, seek_mode='auto', camera_threads='auto'") in proc.stderr.replace("\n", " ")


NONE = inspect.Parameter.empty


@pytest.mark.parametrize(("annotation", "default", "text", "value"), [
    (int, 4, "8", 8), (str | None, None, "2024", "2024"), (int | str, "256M", "256M", "256M"),
    (int | str, "256M", "1024", 1024), (bool, True, "false", False), (bool, True, "1", True),
    (float, 1.0, "2", 2.0), (Optional[int], None, "none", None), (Union[int, str], 0, "x", "x"),  # noqa: UP007, UP045
    (dict | None, None, '{"a": 1}', {"a": 1}), (dict[str, str], None, '{"a": "b"}', {"a": "b"}),
    (tuple[int, ...], (), "[1, 2]", (1, 2)), (Literal["auto", "exact"], "auto", "exact", "exact"),
    (typing.Any, None, "[1]", [1]), (NONE, 3, "5", 5), (NONE, REQUIRED, "x", "x"),
    (NONE, REQUIRED, "[1, 2]", [1, 2]), (str, "main", "true", "true")])
def test_a_text_value_is_read_by_its_type(annotation, default, text, value):
    got = PluginOption("opt", default, annotation, "").convert(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(("annotation", "text", "written"), [(int, "abc", "int"), (int | None, "1.5", "int | None"),
                                                              (bool, "maybe", "bool"), (dict, "[1]", "dict")])
def test_a_value_its_type_cannot_read_is_refused_naming_the_option(annotation, text, written):
    with pytest.raises(ValueError, match=rf"option opt takes {re.escape(written)}, got '{re.escape(text)}'"):
        PluginOption("opt", None, annotation, "").convert(text)


def typo_factory(meta, decoder, config, pool: "itn" = 4):  # noqa: F821 - the typo under test
    """A loader whose option's annotation names no type."""


def callable_factory(meta, decoder, config, on_batch: typing.Callable | None = None):
    """A loader with an option no command-line value can give."""


@pytest.mark.parametrize(("factory", "words"), [
    (typo_factory, "option pool has an annotation .itn. that names no type"),
    (callable_factory, "option on_batch has type")])
def test_an_option_whose_type_is_unknown_is_refused_when_the_plugin_registers(factory, words):
    from dl.host.registry import Registry

    register = Registry().register_callback("loader", "somepkg", "1.0", "somepkg.plugin")
    with pytest.raises(PluginError, match=rf"somepkg \(somepkg.plugin\) registers loader 'bad': {words}"):
        register("bad", factory)


def test_the_docstring_gives_help_and_never_a_type():
    options = factory_options("decoder", Decoder)
    assert options.options[0].annotation is NONE and options.options[0].convert("3") == 3


def test_command_line_options_are_converted_by_the_plugins_annotations():
    from dl.cli.options import plugin_options

    assert plugin_options("source", "bucket", ("revision=2024", "cache_bytes=8G", "prefetch=false"),
                          "--source-option") == {"revision": "2024", "cache_bytes": "8G", "prefetch": False}
    assert plugin_options("loader", "pool", ("episode_pool_size=8", "decode_budget=0"), "--loader-option") == \
        {"episode_pool_size": 8, "decode_budget": 0}
    with pytest.raises(PluginError, match=r"--loader-option: loader 'pool' option episode_pool_size takes int, "
                                          r"got 'many'"):
        plugin_options("loader", "pool", ("episode_pool_size=many",), "--loader-option")


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_dl_run_refuses_an_option_value_of_the_wrong_type_before_running(small_dataset, tmp_path):
    proc = run_dl("run", "--root", str(small_dataset), "--decoder-option", "cache_size=lots", "--out-dir",
                  str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "--decoder-option: decoder 'cpu' option cache_size takes int | None, got 'lots'" in proc.stderr
    assert not (tmp_path / "out").exists()
