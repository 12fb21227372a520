"""The host side of `dl run`: check the configuration once, plan the runs, submit them to a scheduler,
wait, merge ranks, and write the results.

Everything that can be checked before a run starts is checked here, in the host process, once: plugin
names and options, the dataset's metadata and the selected episodes' files. The metadata read for that
check is written as a snapshot the runs load instead of reading it again.
"""

import dataclasses
import json
from pathlib import Path

from ..assembly import open_dataset
from ..errors import DlError
from ..plugins_manager import get_plugins
from ..scheduler import Run, RunStatus, Scheduler, Submission
from .results import merge_ranks, read_results
from .spec import RunSpec


def check_and_snapshot(base: RunSpec, specs_dir: Path) -> RunSpec:
    """Fail before anything is scheduled when the configuration cannot run: unknown plugins, options a plugin
    does not take, a dataset that is not v3.0, missing files of the selected episodes. Returns `base` with
    `metadata_snapshot` set to the snapshot written into `specs_dir`, and the source's pinned options
    (`Source.pinned_options()`: a Hub revision resolved to its commit) added to its source options, so every
    run and rank reads the version checked here without asking the server again.

    Raises:
        PluginError, DlError: what is wrong, naming the option, file or episode.
    """
    registry = get_plugins().registry
    registry.check_options("loader", base.loader, base.loader_options)
    registry.check_options("decoder", base.decoder, base.decoder_options)
    if base.root is None:
        raise DlError("no dataset root: give --root (the host resolves the default dataset before checking).")
    meta = open_dataset(base.root, base.source, base.source_options)
    if not meta.select(base.episodes):
        raise DlError(f"{meta.source.url} has no episodes to load.")
    specs_dir.mkdir(parents=True, exist_ok=True)
    path = specs_dir / "metadata.json"
    path.write_text(json.dumps(meta.to_snapshot()))
    options = {**base.source_options, **meta.source.pinned_options()}  # e.g. the Hub revision as its sha
    return dataclasses.replace(base, metadata_snapshot=str(path.resolve()), source_options=options)


def plan_runs(specs: list[RunSpec], out_dir: Path) -> list[Run]:
    """Write each spec's JSON into `out_dir/specs/` and name its result file(s): `NAME.json`, or
    `NAME-rankR.json` per rank when `world_size` > 1 (the merged `NAME.json` is written after)."""
    (out_dir / "specs").mkdir(parents=True, exist_ok=True)
    runs = []
    for spec in specs:
        spec_path = (out_dir / "specs" / f"{spec.name}.json").resolve()
        spec_path.write_text(json.dumps(spec.to_dict(), indent=2))
        if spec.world_size == 1:
            results = [str((out_dir / f"{spec.name}.json").resolve())]
        else:
            results = [str((out_dir / f"{spec.name}-rank{r}.json").resolve()) for r in range(spec.world_size)]
        runs.append(Run(spec.name, spec.world_size, str(spec_path), results))
    return runs


def collect(submission: Submission, statuses: list[RunStatus]) -> list[dict]:
    """Each run's result (every rank's and a merged line for multi-rank runs), in run order. A rank that
    wrote no result file is a failed result naming the exit status the scheduler saw."""
    out = []
    for run, status in zip(submission.runs, statuses, strict=True):
        ranks = read_results([Path(p) for p in run.result_paths])
        for result in ranks:
            if result.get("status") == "failed" and str(result.get("error", "")).startswith("no result"):
                why = status.detail or f"exit status {status.exit_code}"
                result["error"] = f"the run process ended ({why}) without writing a result"
        if run.world_size == 1:
            out.extend(ranks)
            continue
        merged = merge_ranks(run.name, ranks)
        Path(run.result_paths[0]).with_name(f"{run.name}.json").write_text(json.dumps(merged, indent=2))
        out.extend([*ranks, merged])
    return out


def run_specs(scheduler: Scheduler, specs: list[RunSpec], out_dir: Path) -> list[dict]:
    """Plan, submit, wait, collect. The submission is saved as `out_dir/specs/submission.json`."""
    runs = plan_runs(specs, out_dir)
    submission = scheduler.submit(runs)
    submission.save(out_dir / "specs" / "submission.json")
    statuses = scheduler.wait(submission)
    return collect(submission, statuses)
