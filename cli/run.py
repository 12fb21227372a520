"""`dl run`: assemble plugins into benchmark runs, schedule them, render and save the results."""

import dataclasses
import itertools
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress

from dl.bench.scenarios import SCENARIOS, scenario_options
from dl.bench.spec import MODES, RunSpec

from .options import parse_delta, parse_episodes, parse_key_values, split_csv

_SCENARIO_HELP = "\n".join(f"  {name}: {s['_about']}" for name, s in SCENARIOS.items())
_DEFAULTS = RunSpec()


@click.command(epilog=f"\b\nScenarios (--scenario):\n{_SCENARIO_HELP}\n\n\b\nExamples:\n"
               "  dl run                                   # embedded default dataset, map loader, 2 workers\n"
               "  dl run --root DATASET --episodes 0,3-6 --mode single,sarm --num-workers 0,2\n"
               "  dl run --scenario mmap_local_maxworkers --root DATASET --duration 60\n"
               "  dl run --source bucket --root s3://BUCKET/DATASET --storage-option endpoint_url=URL\n"
               "  dl run --source hub --repo-id OWNER/NAME --revision main --loader pool")
@click.option("--scenario", type=click.Choice(sorted(SCENARIOS)), help="Preset of several options (below).")
@click.option("--source", help=f"Source plugin [{_DEFAULTS.source}].")
@click.option("--loader", help=f"Loader plugin [{_DEFAULTS.loader}].")
@click.option("--decoder", help=f"Decoder plugin [{_DEFAULTS.decoder}].")
@click.option("--scheduler", help=f"Scheduler plugin [{_DEFAULTS.scheduler}].")
@click.option("--root", help="Dataset root for the source. Default: dl's embedded synthetic dataset "
              "(generated once into the cache folder).")
@click.option("--episodes", help="Episodes to load: indices and inclusive ranges, e.g. 0,3-6,8 [all].")
@click.option("--mode", "modes", multiple=True,
              help="single (one frame per camera), sarm (0..7 s at 1 s on every camera and the action), chunk "
                   "(16-step action chunk at 1/fps). Comma-separate or repeat to run several [single].")
@click.option("--delta-timestamps", "deltas", multiple=True, metavar="KEY=OFFSETS",
              help="Extra window in seconds on any key, e.g. observation.state=-0.1,0 (repeatable).")
@click.option("--image-dtype", type=click.Choice(["float32", "uint8"]), help="Camera frames as float32 in [0, 1] "
              "or raw uint8 [float32].")
@click.option("--batch-size", type=click.IntRange(1), help=f"[{_DEFAULTS.batch_size}]")
@click.option("--num-workers", "workers", multiple=True,
              help=f"DataLoader workers; comma-separate or repeat to run several [{_DEFAULTS.num_workers}].")
@click.option("--world-size", type=click.IntRange(1), help="Ranks: >1 runs that many processes as a "
              "torch.distributed gloo group on this machine (per-rank results and a merged line) [1].")
@click.option("--prefetch-factor", type=click.IntRange(1), help=f"Batches per worker in flight "
              f"[{_DEFAULTS.prefetch_factor}].")
@click.option("--warmup-batches", type=click.IntRange(0), help=f"Batches before the window "
              f"[{_DEFAULTS.warmup_batches}].")
@click.option("--duration", type=click.FloatRange(0.1), help=f"Steady-state window, seconds [{_DEFAULTS.duration}].")
@click.option("--single-proc-samples", type=click.IntRange(1), help="Samples timed in-process for the "
              f"fetch/decode split [{_DEFAULTS.single_proc_samples}].")
@click.option("--seed", type=int, help=f"Shuffle seed [{_DEFAULTS.seed}].")
@click.option("--repo-id", help="A Hub dataset repo, owner/name: the root of --source hub (same as --root "
              "hf://datasets/owner/name), or where --source bucket reads meta/ while --data-files-root holds the rest.")
@click.option("--revision", help="Hub branch, tag or commit of --repo-id [main]; resolved to its commit once, "
              "every run reads that commit (source option revision).")
@click.option("--data-files-root", help="Where data/ and videos/ live when meta/ is elsewhere, e.g. s3://bucket/ds "
              "(source option data_files_root; --source bucket).")
@click.option("--storage-option", multiple=True, metavar="KEY=VALUE", help="A filesystem option of a remote source, "
              "e.g. endpoint_url=http://127.0.0.1:9000, profile=NAME, anon=true (repeatable; source option "
              "storage_options).")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin "
              "(repeatable; `dl plugins` lists each plugin's options).")
@click.option("--loader-option", multiple=True, metavar="KEY=VALUE", help="An option of the loader plugin, e.g. "
              "episode_pool_size=64 for pool (repeatable).")
@click.option("--decoder-option", multiple=True, metavar="KEY=VALUE", help="An option of the decoder plugin, "
              "e.g. cache_size=16 (repeatable).")
@click.option("--scheduler-option", multiple=True, metavar="KEY=VALUE", help="An option of the scheduler plugin, "
              "e.g. timeout_s=600 (repeatable).")
@click.option("--out-dir", type=click.Path(file_okay=False), help=f"Where JSON + CSV go [{_DEFAULTS.out_dir}].")
def run(scenario, modes, deltas, workers, episodes, source_option, loader_option, decoder_option, scheduler_option,
        repo_id, revision, data_files_root, storage_option, **given):
    """Benchmark dataloading: samples/s, decoded frames/s, fetch vs decode split, shuffle randomness,
    latency percentiles, peak RSS of the process tree, decoder cache counters.

    Every combination of --mode and --num-workers is one run, each in a fresh process. Results print as
    a table and are written to OUT_DIR as one JSON per run and results.csv.
    """
    preset = scenario_options(scenario) if scenario else {}
    fields = {**preset, **{k: v for k, v in given.items() if v is not None}}
    fields.update(scenario=scenario, delta_timestamps=parse_delta(deltas))
    for kind, items in (("source", source_option), ("loader", loader_option), ("decoder", decoder_option)):
        fields[f"{kind}_options"] = {**preset.get(f"{kind}_options", {}),
                                     **parse_key_values(items, f"--{kind}-option")}
    fields["source_options"].update(_remote_options(fields, repo_id, revision, data_files_root, storage_option))
    if episodes:
        fields["episodes"] = parse_episodes(episodes)
    mode_list = split_csv(modes) or [_DEFAULTS.mode]
    bad = [m for m in mode_list if m not in MODES]
    if bad:
        raise click.BadParameter(f"{', '.join(bad)}: choose from {', '.join(MODES)}", param_hint="--mode")
    try:
        worker_list = split_csv(workers, int) or [fields.get("num_workers", _DEFAULTS.num_workers)]
    except ValueError:
        raise click.BadParameter(f"{', '.join(workers)}: give integers", param_hint="--num-workers") from None
    from dl.bench.loopback import serve_on_loopback
    from dl.bench.results import write_csv
    from dl.bench.session import check_and_snapshot, run_specs
    from dl.plugins_manager import get_plugins

    from .render import render_results

    base = RunSpec(**fields)
    console = Console()
    out_dir = Path(base.out_dir)
    scheduler = get_plugins().registry.create("scheduler", base.scheduler,
                                              **parse_key_values(scheduler_option, "--scheduler-option"))
    if base.root is None:
        base.root = str(_default_root(console))
    with serve_on_loopback(base, lambda line: console.print(line, highlight=False)) as base:
        base = check_and_snapshot(base, out_dir / "specs")
        specs = [dataclasses.replace(base, mode=m, num_workers=w, name="")
                 for m, w in itertools.product(mode_list, worker_list)]
        results = run_specs(scheduler, specs, out_dir)
    write_csv(results, out_dir / "results.csv")
    render_results(results, console)
    console.print(f"results: {out_dir}/results.csv and {len(results)} JSON file(s) in {out_dir}/", highlight=False)
    if any(r.get("status") != "ok" for r in results):
        sys.exit(1)


def _remote_options(fields: dict, repo_id, revision, data_files_root, storage_option) -> dict:
    """The remote-source flags as source options (and --repo-id as the root); checked by the source."""
    if repo_id:
        if fields.get("root"):
            raise click.BadParameter("give --root or --repo-id, not both (with --repo-id, --data-files-root names "
                                     "where the data lives)", param_hint="--repo-id")
        fields["root"] = f"hf://datasets/{repo_id}"
    options = {"revision": revision, "data_files_root": data_files_root}
    storage = parse_key_values(storage_option, "--storage-option")
    if storage:
        options["storage_options"] = storage
    return {k: v for k, v in options.items() if v is not None}


def _default_root(console: Console) -> Path:
    from dl.bench.default_dataset import default_dataset_root, ensure_default_dataset

    if not (default_dataset_root() / "meta" / "info.json").is_file():
        console.print(f"generating dl's embedded default dataset into {default_dataset_root()} (once)")
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("encoding episodes", total=None)
        return ensure_default_dataset(progress=lambda done, total: bar.update(task, completed=done, total=total))
