"""Compare dl's `map` loader with LeRobot's `LeRobotDataset`, sample by sample.

LeRobot lives in its own venv (../shared/anchors/lerobot/setup.sh builds it), so each comparison has a LeRobot side
(run with the anchor's python) and a dl side (run with dl's).

Every case dl's tests generate (`dl.testing.real_cases`: what LeRobot's tools write; `dl.testing.broken_cases`:
how datasets go wrong; `dl.testing.timing_cases`: real recordings' frame times, at LeRobot's defaults and at the
further settings each names), each read without and with windows, in one command that runs both sides against
every anchor given (LeRobot 0.4.4 and 0.6.1) and prints the counts per case and anchor:

    .venv/bin/python benchmarks/lerobot_parity.py cases --anchor-python /work/anchor/venv/bin/python \
        --anchor-python /work/anchor/venv06/bin/python --out /tmp/parity

`--made DIR` adds the cases LeRobot's own tools make (benchmarks/lerobot_made_cases.py), cached in DIR (outside --out);
`--only timing` runs the frame-time cases (and --made's), `--only made` --made's. In these every row's frame was
recorded with it, so a served frame is checked against the row's own (`dl.testing.timing_cases.own_frame`), and
`dl validate` must flag exactly the episodes the loader refuses (benchmarks/validate_agreement.py).

LeRobot 0.6.1's datasets with a depth camera and language columns (`lerobot06`: LeRobot 0.6.1's own writer and
annotation writer; benchmarks/lerobot06_cases.py), every sample in map and pool, with and without windows, through a
DataLoader with workers, depth in mm and in m:

    .venv/bin/python benchmarks/lerobot_parity.py lerobot06 --anchor-python $ANCHOR_DIR/venv06/bin/python --out /tmp/p06

One dataset, at chosen positions:

    $ANCHOR_DIR/venv/bin/python benchmarks/lerobot_parity.py dump --root R --episodes 0,3-6 \\
        --delta actions=0,1,2 --positions 0,100,5000 --out /tmp/lerobot.pt
    .venv/bin/python benchmarks/lerobot_parity.py compare --root R --episodes 0,3-6 \\
        --delta actions=0,1,2 --positions 0,100,5000 --ref /tmp/lerobot.pt

`compare` prints one line per key with the largest absolute difference and exits 1 on any mismatch; `cases` exits 1
on any outcome dl does not explain (a value that differs for no documented reason, or data dl refuses that LeRobot
serves right).
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

OUTCOMES = {
    "same": "every key equal",
    "dl_left_out": "equal but for the features dl leaves out (depth, language), named in a notice",
    "lerobot_wrong_dl_right": "values differ: LeRobot's are not the row's (another episode's frame past a recorded "
                              "episode's span), dl's are",
    "dl_refuses_lerobot_wrong": "dl refuses; LeRobot serves values that are not the row's",
    "dl_refuses_lerobot_fails": "dl refuses; LeRobot raises",
    "dl_refuses_lerobot_unbatchable": "dl refuses; LeRobot serves frames of another size than the camera's other "
                                      "files (its batches fail to stack)",
    "dl_refuses_inconsistent_span": "dl refuses an episode whose camera span is not its length (from or to "
                                    "timestamp wrong, and which one cannot be told); LeRobot reads only from_timestamp",
    "lerobot_fails_dl_serves": "LeRobot raises; dl serves the row's values",
    "dl_refuses_episode_lerobot_errs_in_it": "dl refuses the episode up front (one line, with the fix); LeRobot "
                                             "serves this row right but raises, or serves wrong values, on other "
                                             "rows of the episode",
    "both_wrong_same": "equal, and both not the row's own frame (a tolerance over half a frame, LeRobot's pairing)",
    "MISMATCH": "values differ, unexplained",
    "DL_REFUSES_GOOD_DATA": "dl refuses a sample LeRobot serves right",
}


def parse_delta(items):
    out = {key: [float(x) for x in offsets.split(",")] for key, offsets in (i.split("=", 1) for i in items or [])}
    return out or None


def parse_list(text):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


# ----------------------------------------------------------------------------------------------- LeRobot side


def lerobot_dataset(root, episodes, delta, tolerance_s=1e-4):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    return LeRobotDataset("local/parity", root=root, episodes=episodes, video_backend="torchcodec",
                          delta_timestamps=delta, tolerance_s=tolerance_s)


def dump(args):
    ds = lerobot_dataset(args.root, parse_list(args.episodes), parse_delta(args.delta))
    torch.save({p: ds[p] for p in parse_list(args.positions)}, args.out)
    print(f"dumped {len(parse_list(args.positions))} LeRobot samples of {len(ds)} to {args.out}")


def dump_cases(args):
    """Every case of `cases.json`: LeRobot's sample (or its error) at every position, or its construction error."""
    specs = json.loads(Path(args.cases, "cases.json").read_text())
    for name, spec in specs.items():
        out = {"error": None, "samples": {}}
        try:
            ds = lerobot_dataset(spec["root"], spec["episodes"], spec["delta"], spec["tolerance_s"])
        except Exception as exc:  # what LeRobot raises is the finding
            out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        else:
            for position in range(len(ds)):
                try:
                    out["samples"][position] = ds[position]
                except Exception as exc:
                    out["samples"][position] = {"__error__": f"{type(exc).__name__}: {exc}"[:300]}
        torch.save(out, Path(args.cases, f"{name}.lerobot{args.suffix}.pt"))
        print(f"{name}: {out['error'] or str(len(out['samples'])) + ' samples'}")


# ----------------------------------------------------------------------------------------------- dl side


def compare(args):
    import dl

    ds = dl.make_dataset(args.root, episodes=parse_list(args.episodes), delta_timestamps=parse_delta(args.delta))
    ref = torch.load(args.ref, weights_only=False)
    worst: dict[str, float] = {}
    bad = 0
    for position, theirs in ref.items():
        ours = ds[position]
        for key, value in theirs.items():
            if key not in ours:
                print(f"position {position}: dl lacks {key!r}")
                bad += 1
                continue
            diff = _difference(ours[key], value)
            worst[key] = max(worst.get(key, 0.0), diff)
            bad += diff != 0
    for key, diff in sorted(worst.items()):
        print(f"{key:30s} max |dl - lerobot| = {diff}")
    print(f"{len(ref)} samples, {bad} mismatching values")
    sys.exit(1 if bad else 0)


def _difference(ours, theirs) -> float:
    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor) or ours.shape != theirs.shape or ours.dtype != theirs.dtype:
            return float("inf")
        if torch.equal(ours.nan_to_num(), theirs.nan_to_num()) and torch.equal(ours.isnan(), theirs.isnan()):
            return 0.0
        return (ours.double() - theirs.double()).abs().max().item()
    return 0.0 if ours == theirs else float("inf")


def write_cases(out: Path, only: str, made: dict | None = None) -> dict:
    """Every real, broken and timing case under `out` (`only`: "all", "timing" or "made"), and the LeRobot-made
    cases of `made` (`lerobot_made_cases.made_specs`), each read without and with windows (a timing or made case
    also at each of its further settings); returns the specs (also written as `out/cases.json`, for the LeRobot
    side)."""
    import shutil

    from dl.testing.broken_cases import BASE, BROKEN, WARNED
    from dl.testing.real_cases import REAL_CASES, windows
    from dl.testing.synthetic import write_synthetic_dataset
    from dl.testing.timing_cases import TIMING_CASES, TIMING_OPTIONS

    specs = {}
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    datasets = {}
    if only == "all":
        base = write_synthetic_dataset(out / "_base", BASE)
        for name, case in REAL_CASES.items():
            datasets[name] = (write_synthetic_dataset(out / name, case.config), case.config, case.options, "real")
        for name, (edit, _) in {**BROKEN, **WARNED}.items():
            root = shutil.copytree(base, out / name)
            edit(root)
            datasets[name] = (root, BASE, {}, "broken" if name in BROKEN else "warned")
    timing = {} if only == "made" else {name: (write_synthetic_dataset(out / name, case.config), case.config,
                                               [case.options, *TIMING_OPTIONS.get(name, [])])
                                        for name, case in TIMING_CASES.items()}
    for name, (root, config, settings) in {**timing, **(made or {})}.items():
        for options in settings:
            label = "+".join(f"{k}={v}" for k, v in options.items())
            datasets[f"{name}[{label}]" if label else name] = (root, config, options, "timing")
    for name, (root, config, options, kind) in datasets.items():
        for variant, delta in (("single", None), ("windows", windows(config))):
            specs[f"{name}-{variant}"] = {"root": str(root), "kind": kind, "episodes": options.get("episodes"),
                                          "tolerance_s": options.get("tolerance_s", 1e-4), "delta": delta,
                                          "frame_pairing": options.get("frame_pairing", "timestamp")}
    (out / "cases.json").write_text(json.dumps(specs, indent=2))
    return specs


def case_config(name: str):
    """The generator config of a case variant (`write_cases`): the truth its values are checked against."""
    from lerobot_made_cases import MADE_CASES, truth

    from dl.testing.broken_cases import BASE
    from dl.testing.real_cases import REAL_CASES
    from dl.testing.timing_cases import TIMING_CASES

    case = name.rsplit("-", 1)[0].split("[")[0]
    if case in MADE_CASES:
        return truth(case)
    return REAL_CASES[case].config if case in REAL_CASES else TIMING_CASES[case].config if case in TIMING_CASES \
        else BASE


def compare_case(spec: dict, config, ref: dict) -> dict[str, int]:
    """Outcome counts of one case (`OUTCOMES`), position by position. Where dl refuses the case's selection as a
    whole (it names the episodes to leave out), each position is compared with dl reading its episode alone."""
    import warnings

    import numpy as np

    import dl
    from dl.host.assembly import open_dataset

    counts = dict.fromkeys(OUTCOMES, 0)
    built: dict = {}

    def dataset(episodes):
        key = None if episodes is None else tuple(episodes)
        if key not in built:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    built[key] = dl.make_dataset(spec["root"], episodes=episodes, delta_timestamps=spec["delta"],
                                                 tolerance_s=spec["tolerance_s"],
                                                 frame_pairing=spec.get("frame_pairing", "timestamp"))
                except dl.DlError as exc:
                    built[key] = str(exc)
        return built[key]

    whole = dataset(spec["episodes"])
    where = None  # position -> (episode, row) when episodes are read alone
    if isinstance(whole, str):
        try:
            meta = open_dataset(spec["root"])
        except dl.DlError:
            meta = None
        if meta is not None:
            chosen = spec["episodes"] or sorted(meta.episodes)
            starts = np.cumsum([0] + [meta.episodes[e].length for e in chosen])
            where = {p: (chosen[int(np.searchsorted(starts, p, side="right")) - 1],
                         p - int(starts[int(np.searchsorted(starts, p, side="right")) - 1]))
                     for p in range(int(starts[-1]))}
    failing = set()  # episodes on some row of which LeRobot raises or serves wrong values
    if ref["error"] is None and meta_of(spec["root"]) is not None:
        from dl.testing.real_cases import sample_problems
        from dl.testing.timing_cases import own_frame

        meta = meta_of(spec["root"])
        chosen = spec["episodes"] or sorted(meta.episodes)
        firsts = np.cumsum([0] + [meta.episodes[e].length for e in chosen])
        own = own_frame if spec["kind"] == "timing" else None
        failing = {chosen[int(np.searchsorted(firsts, p, side="right")) - 1] for p, s in ref["samples"].items()
                   if "__error__" in s or sample_problems(config, s, spec["delta"], own)}
    positions = ref["samples"] if ref["error"] is None else (where or range(len(whole) if not isinstance(whole, str)
                                                                            else 0))
    for position in positions:
        theirs = ref["samples"].get(position) if ref["error"] is None else {"__error__": ref["error"]}
        ds, row = (whole, position) if where is None else (dataset([where[position][0]]), where[position][1])
        if isinstance(ds, str):
            ours = ds
        else:
            try:
                ours = ds[row]
            except dl.DlError as exc:
                ours = str(exc)
            except IndexError:  # LeRobot serves more positions than dl
                counts["MISMATCH"] += 1
                continue
        outcome = _outcome(ours, theirs, ds, config, spec["delta"], spec["kind"] == "timing")
        if outcome == "DL_REFUSES_GOOD_DATA" and int(theirs["episode_index"]) in failing:
            outcome = "dl_refuses_episode_lerobot_errs_in_it"
        counts[outcome] += 1
    if ref["error"] is not None and not positions:
        counts["dl_refuses_lerobot_fails"] += 1  # neither builds: one outcome for the case
    return counts


def meta_of(root: str):
    """The dataset's metadata, or None when dl cannot open it."""
    import dl
    from dl.host.assembly import open_dataset

    try:
        return open_dataset(root)
    except dl.DlError:
        return None


def _outcome(ours, theirs: dict, ds, config, delta, own: bool) -> str:
    """One position's outcome; a sample's values are checked against the generator's truth
    (`dl.testing.real_cases.sample_problems`: frames by their drawn index codes, each row's own with `own`,
    vectors by their values)."""
    from functools import partial

    from dl.testing.real_cases import sample_problems
    from dl.testing.timing_cases import own_frame

    sample_problems = partial(sample_problems, frame_of=own_frame if own else None)
    lerobot_failed = "__error__" in theirs
    if isinstance(ours, str):
        if lerobot_failed:
            return "dl_refuses_lerobot_fails"
        if sample_problems(config, theirs, delta):
            return "dl_refuses_lerobot_wrong"
        if _unbatchable(theirs, config):
            return "dl_refuses_lerobot_unbatchable"
        if "but the episode has" in ours:
            return "dl_refuses_inconsistent_span"
        return "DL_REFUSES_GOOD_DATA"
    if lerobot_failed:
        return "lerobot_fails_dl_serves"
    left_out = set(ds.meta.left_out) | {f"{k}_is_pad" for k in ds.meta.left_out}
    differing = {k for k in set(ours) | set(theirs) if k not in ours or k not in theirs or
                 _difference(ours[k], theirs[k]) != 0}
    if not differing:
        return "both_wrong_same" if own and sample_problems(config, ours, delta) else "same"
    if differing <= left_out:
        return "dl_left_out"
    if sample_problems(config, theirs, delta) and not sample_problems(config, ours, delta):
        return "lerobot_wrong_dl_right"
    return "MISMATCH"


def _unbatchable(sample: dict, config) -> bool:
    """Whether a sample's camera frames are not the size the dataset's cameras have."""
    return any(isinstance(sample.get(key), torch.Tensor) and tuple(sample[key].shape[-2:]) != (config.height,
                                                                                              config.width)
               for key in config.camera_keys)


def cases(args):
    out = Path(args.out).absolute()
    anchors = args.anchor_python or []
    versions = [subprocess.run([p, "-c", "import lerobot; print(lerobot.__version__)"], capture_output=True,
                               text=True).stdout.strip() or p for p in anchors]
    if args.reuse:  # the datasets and LeRobot's samples of an earlier run
        specs = json.loads((out / "cases.json").read_text())
    else:
        from lerobot_made_cases import made_specs

        made = made_specs(Path(args.made).absolute(), anchors, versions) if args.made else None
        specs = write_cases(out, args.only, made)
        for i, python in enumerate(anchors):
            subprocess.run([python, __file__, "dump-cases", "--cases", str(out), "--suffix", str(i)], check=True)
    from validate_agreement import report

    rows, unexplained = {}, 0
    for name, spec in specs.items():
        unexplained += spec["kind"] == "timing" and not report(name, spec)
        for i, version in enumerate(versions):
            ref = torch.load(out / f"{name}.lerobot{i}.pt", weights_only=False)
            row = rows[f"{name} @{version}"] = compare_case(spec, case_config(name), ref)
            print(f"{name} @{version}: { {k: v for k, v in row.items() if v} }", flush=True)
            unexplained += row["MISMATCH"] + row["DL_REFUSES_GOOD_DATA"]
    (out / "parity.json").write_text(json.dumps(rows, indent=2))
    shown = [k for k in OUTCOMES if any(r[k] for r in rows.values())]
    width = max(map(len, rows))
    print(f"{'case':{width}s}  " + "  ".join(f"{k:>{max(len(k), 5)}s}" for k in shown))
    for name, row in rows.items():
        print(f"{name:{width}s}  " + "  ".join(f"{row[k]:>{max(len(k), 5)}d}" for k in shown))
    for key in shown:
        print(f"{key}: {OUTCOMES[key]}")
    print(f"{len(rows)} case variants x anchors, {unexplained} unexplained outcome(s) (and validate disagreements); "
          f"counts in {out / 'parity.json'}")
    sys.exit(1 if unexplained else 0)


def lerobot06(args):
    """LeRobot 0.6.1's depth and language cases (`lerobot06_cases.run_all`)."""
    from lerobot06_cases import run_all

    sys.exit(run_all(Path(args.out).absolute(), args.anchor_python[-1]))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["dump", "compare", "cases", "dump-cases", "lerobot06"])
    ap.add_argument("--root")
    ap.add_argument("--episodes")
    ap.add_argument("--delta", action="append", help="KEY=OFFSETS_S (repeatable)")
    ap.add_argument("--positions")
    ap.add_argument("--out")
    ap.add_argument("--ref")
    ap.add_argument("--cases", help="dump-cases: the folder `cases` wrote")
    ap.add_argument("--anchor-python", action="append", help="cases: the python of a LeRobot anchor venv "
                    "(repeatable: 0.4.4's and 0.6.1's); lerobot06: 0.6.1's (the last given)")
    ap.add_argument("--only", choices=["all", "timing", "made"], default="all", help="cases: every case, the "
                    "frame-time cases (and --made's), or --made's alone")
    ap.add_argument("--made", help="cases: the folder LeRobot-made cases are cached in (benchmarks/"
                    "lerobot_made_cases.py writes the missing ones there with the anchors); without it, none")
    ap.add_argument("--suffix", default="0", help="dump-cases: the anchor's number in the file names")
    ap.add_argument("--reuse", action="store_true", help="cases: compare the datasets and LeRobot samples of an "
                    "earlier run in --out instead of writing and dumping them again")
    a = ap.parse_args()
    {"dump": dump, "compare": compare, "cases": cases, "dump-cases": dump_cases, "lerobot06": lerobot06}[a.command](a)
