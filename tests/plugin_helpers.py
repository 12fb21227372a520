"""Shared constants and helpers of the plugin-host tests (test_plugins.py, test_example_plugin.py)."""

import os
import subprocess
import sys
from importlib.metadata import EntryPoint, distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "dl-example-zip"
BUILTINS = {("source", "local"): "dl.plugins.local_source", ("source", "hub"): "dl.plugins.remote.hub",
            ("source", "bucket"): "dl.plugins.remote.bucket", ("loader", "map"): "dl.plugins.map",
            ("loader", "pool"): "dl.plugins.pool", ("decoder", "cpu"): "dl.plugins.cpu_decoder",
            ("decoder", "nvdec"): "dl.plugins.nvdec_decoder",
            ("scheduler", "local"): "dl.plugins.local_scheduler", ("scheduler", "slurm"): "dl.plugins.slurm",
            **{("loader", peer): "dl.plugins.peers" for peer in ("lerobot", "lerobot_stream", "lance", "ray", "daft")}}
CAMERA = "observation.images.cam0"


def run_dl(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`dl ARGS` in a fresh interpreter (the plugin set is loaded once per process)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("DL_DISABLE_PLUGINS", "DL_STRICT_PLUGINS")}
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})
    return subprocess.run([sys.executable, "-c", "from dl.cli.main import main; main()", *args],
                          capture_output=True, text=True, env=full_env, timeout=timeout)


def fake_distribution(site: Path, dist: str, dist_version: str, eps: dict[str, str]) -> list[EntryPoint]:
    """Write `<dist>-<version>.dist-info` (METADATA + entry_points.txt) into `site`; return its `dl` entry
    points, read back through importlib.metadata so each one knows its distribution."""
    info = site / f"{dist.replace('-', '_')}-{dist_version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {dist_version}\n")
    (info / "entry_points.txt").write_text("[dl]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    (found,) = [d for d in distributions(path=[str(site)]) if d.metadata["Name"] == dist]
    return [e for e in found.entry_points if e.group == "dl"]
