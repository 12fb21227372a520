"""The host side of `dl run`: check the configuration once, plan the runs, submit them to a scheduler,
wait, merge ranks, and write the results.

Everything that can be checked before a run starts is checked here, in the host process, once: plugin
names and options, the dataset's metadata and the selected episodes' files. The metadata read for that
check is written as a snapshot the runs load instead of reading it again.
"""

import dataclasses
import json
import warnings
from pathlib import Path

from ..contracts.errors import DlError, DlWarning
from ..contracts.loader import RunsInOwnEnvironment
from ..contracts.scheduler import Run, RunStatus, Scheduler, Submission
from ..contracts.source import Prefetches
from ..format.metadata import DatasetMeta
from ..format.streams import check_streams
from ..host.assembly import build_decoder, open_dataset
from ..host.manager import get_plugins
from .calibrate import AUTO, check_auto_options, resolve_auto_decoder
from .resources import run_resources
from .results import merge_ranks, read_results, write_folder_csv
from .spec import RunSpec

SUBMISSION = "submission.json"


def check_plugins(base: RunSpec) -> None:
    """Fail before anything is done when a plugin name is unknown, an option is one its plugin does not take, or a
    peer loader's library is installed nowhere dl knows.

    Raises:
        PluginError: naming the plugin and listing the options it accepts, or naming what to install.
    """
    registry = get_plugins().registry
    registry.get("source", base.source)
    registry.check_options("loader", base.loader, base.loader_options)
    run_interpreter(base)  # a peer loader installed nowhere dl knows is refused here
    if base.decoder == AUTO:  # resolved once the dataset is read (`resolve_decoder`)
        check_auto_options(base)
        return
    registry.check_options("decoder", base.decoder, base.decoder_options)


def resolve_decoder(base: RunSpec, meta: DatasetMeta) -> RunSpec:
    """With `--decoder auto`: the spec with the decoder that decodes this dataset fastest here, timed once in
    this process on a few selected episodes, and the calibration recorded (`dl.bench.calibrate`); else `base`.

    Raises:
        DlError: no decoder can decode the dataset here.
    """
    return resolve_auto_decoder(base, meta, get_plugins().registry)


def check_dataset(base: RunSpec) -> DatasetMeta:
    """Read the dataset's metadata once and check the selection: a dataset that is not v3.0 or is
    inconsistent, unknown episodes, missing files of the selected episodes. A remote source indexes the
    selected episodes' files here (`Source.prepare`), so the snapshot carries the indexes to every run and
    rank. Writes nothing.

    Raises:
        DlError: what is wrong, naming the file or episode.
    """
    if base.root is None:
        raise DlError("no dataset root: give --root (the host resolves the default dataset before checking).")
    meta = open_dataset(base.root, base.source, base.source_options)
    selected = meta.select(base.episodes)
    if not selected:
        raise DlError(f"{meta.source.url} has no episodes to load.")
    if isinstance(meta.source, Prefetches):  # indexes, into the snapshot
        meta.source.prepare([span for ep in selected for span in meta.file_spans(ep)])
    return meta


def stream_warnings(base: RunSpec, meta: DatasetMeta) -> RunSpec:
    """Probe the first selected episode's video files here, once for every run of the command, so what info.json
    gets wrong about them (`dl.format.streams.check_streams`: another codec, frame rate or frame size) prints once;
    returns `base` with those warnings in `warned`, which its runs then leave out."""
    selected = meta.select(base.episodes)
    if not meta.video_keys or not len(selected):
        return base
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DlWarning)
        check_streams(meta, build_decoder("cpu"), selected[0], selected)
    for w in seen:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    told = [str(w.message) for w in seen if issubclass(w.category, DlWarning)]
    return dataclasses.replace(base, warned=[*base.warned, *told])


def write_snapshot(base: RunSpec, meta: DatasetMeta, specs_dir: Path) -> RunSpec:
    """Write the metadata read by `check_dataset` into `specs_dir` (`metadata.json` and the episode columns
    `episodes.arrow`, `DatasetMeta.write_snapshot`) for the runs (and their ranks) to load instead of reading
    it again, mapping the columns; returns `base` pointing at it, with the source's pinned options
    (`Source.pinned_options()`: a Hub revision resolved to its commit) added to its source options, so every
    run and rank reads the version checked here without asking the server again."""
    path = meta.write_snapshot(specs_dir)
    options = {**base.source_options, **meta.source.pinned_options()}  # e.g. the Hub revision as its sha
    return dataclasses.replace(base, metadata_snapshot=path, source_options=options)


def plan_runs(specs: list[RunSpec], out_dir: Path) -> list[Run]:
    """Write each spec's JSON into `out_dir/specs/` and name its result file(s): `NAME.json`, or
    `NAME-rankR.json` per rank when `world_size` > 1 (the merged `NAME.json` is written after); complete
    each run's cluster resources and the interpreter its loader needs (`RunsInOwnEnvironment`: a peer's venv).

    Raises:
        DlError: a run's resources are unknown or do not fit its world size (before anything is written).
        PluginError: a peer loader's library is installed nowhere dl knows (one line naming what to install).
    """
    resources = [run_resources(spec) for spec in specs]
    pythons = [run_interpreter(spec) for spec in specs]
    (out_dir / "specs").mkdir(parents=True, exist_ok=True)
    runs = []
    for spec, needs, python in zip(specs, resources, pythons, strict=True):
        spec_path = (out_dir / "specs" / f"{spec.name}.json").resolve()
        spec_path.write_text(json.dumps(spec.to_dict(), indent=2))
        if spec.world_size == 1:
            results = [str((out_dir / f"{spec.name}.json").resolve())]
        else:
            results = [str((out_dir / f"{spec.name}-rank{r}.json").resolve()) for r in range(spec.world_size)]
        runs.append(Run(spec.name, spec.world_size, str(spec_path), results, needs, python))
    return runs


def run_interpreter(spec: RunSpec) -> str | None:
    """The interpreter `spec`'s loader runs in (None: the scheduler's own)."""
    if spec.mix:
        return None
    factory = get_plugins().registry.get("loader", spec.loader).factory
    return factory.interpreter(**spec.loader_options) if isinstance(factory, RunsInOwnEnvironment) else None


def collect(submission: Submission, statuses: list[RunStatus]) -> list[dict]:
    """Each run's result (every rank's and a merged line for multi-rank runs), in run order. A rank that
    wrote no result file gets one written here: failed, naming what the scheduler saw (exit status,
    signal, timeout), so the folder and its CSV record the cause."""
    out = []
    for run, status in zip(submission.runs, statuses, strict=True):
        ranks = []
        for rank, path in enumerate(run.result_paths):
            (result,) = read_results([Path(path)])
            if not Path(path).is_file():
                why = status.detail or f"exit status {status.exit_code}"
                name = run.name if run.world_size == 1 else f"{run.name}-rank{rank}"
                result = {"name": name, "status": "failed",
                          "error": f"the run process ended ({why}) without writing a result"}
                Path(path).write_text(json.dumps(result, indent=2))
            ranks.append(result)
        if run.world_size == 1:
            out.extend(ranks)
            continue
        merged = merge_ranks(run.name, ranks)
        Path(run.result_paths[0]).with_name(f"{run.name}.json").write_text(json.dumps(merged, indent=2))
        out.extend([*ranks, merged])
    return out


def submit_specs(scheduler: Scheduler, specs: list[RunSpec], out_dir: Path) -> Submission:
    """Plan and submit; the submission is saved as `out_dir/specs/submission.json` (what `dl status` reads)."""
    runs = plan_runs(specs, out_dir)
    submission = scheduler.submit(runs)
    submission.save(out_dir / "specs" / SUBMISSION)
    return submission


def load_submission(out_dir: Path) -> Submission:
    """The submission `dl run` saved in `out_dir`.

    Raises:
        DlError: there is none (not a `dl run` output folder, or the run was refused before submitting).
    """
    path = Path(out_dir) / "specs" / SUBMISSION
    try:
        return Submission.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise DlError(f"{path} does not exist: give the --out-dir of a `dl run` that submitted runs.") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise DlError(f"{path} is not a dl submission ({exc}).") from None


def finish(submission: Submission, statuses: list[RunStatus], out_dir: Path) -> tuple[list[dict], int]:
    """Collect every run's result (ranks merged) and rewrite `out_dir/results.csv` over every result in the
    folder; (this submission's results, the number of rows in the CSV)."""
    results = collect(submission, statuses)
    return results, write_folder_csv(Path(out_dir))
