"""examples/train_streaming_multinode.py, run for real: 2 processes (torchrun, gloo) stopped and resumed see
exactly what an uninterrupted run sees (samples and final weights); a 2-process checkpoint resumed on 1
process with other workers serves the rest of the epoch exactly once; under SLURM a job cut by its time
limit checkpoints on the warning signal, requeues itself and continues with nothing lost or repeated."""

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dl.format.metadata import DatasetMeta
from dl.plugins.local_source import local_source

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_streaming_multinode.py"
TABULAR = dict(episodes=8, frames_per_episode=(10, 20), cameras=0, episodes_per_file=3)
COMMON = ["--batch-size", "4", "--episode-pool-size", "2", "--seed", "7", "--log-every", "5", "--checkpoint-every", "4"]
TIMEOUT_S = 240


def train(tmp_path, name, root, processes, *args):
    """Run the example (torchrun --standalone for several processes); its per-rank sample logs."""
    log = tmp_path / name / "samples"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"] \
        if processes > 1 else [sys.executable]
    done = subprocess.run([*launcher, str(EXAMPLE), "--root", str(root), "--sample-log", str(log), *COMMON,
                           *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done


def steps(log_dir: Path) -> dict[int, list[dict]]:
    """{rank: [step records]} from the sample logs."""
    return {int(p.stem[4:]): [json.loads(line) for line in p.read_text().splitlines()]
            for p in sorted(Path(log_dir).glob("rank*.jsonl"))}


def every_index(root) -> list[int]:
    meta = DatasetMeta.load(local_source(str(root)))
    return [i for ep in meta.select(None) for i in range(ep.dataset_from_index, ep.dataset_to_index)]


def final_weights(checkpoint_dir: Path) -> dict:
    return load_file(checkpoint_dir / (checkpoint_dir / "latest").read_text().strip() / "model.safetensors")


def test_two_processes_stop_and_resume_exactly(dataset_factory, tmp_path):
    root = dataset_factory(**TABULAR)
    whole = train(tmp_path, "whole", root, 2, "--checkpoint-dir", tmp_path / "whole" / "ckpt", "--epochs", 2,
                  "--num-workers", 2)
    assert "frames/s in total (rank 0:" in whole.stdout
    cut = tmp_path / "cut" / "ckpt"
    train(tmp_path, "cut", root, 2, "--checkpoint-dir", cut, "--epochs", 2, "--num-workers", 2, "--max-steps", 6)
    assert (cut / "latest").read_text().strip() == "step-00000006"
    resumed = train(tmp_path, "cut", root, 2, "--checkpoint-dir", cut, "--epochs", 2, "--num-workers", 2,
                    "--resume", "required")
    assert "resumed from" in resumed.stdout and "at step 6" in resumed.stdout
    expected, got = steps(tmp_path / "whole" / "samples"), steps(tmp_path / "cut" / "samples")
    assert set(got) == {0, 1}
    for rank in (0, 1):
        assert [(s["step"], s["index"]) for s in got[rank]] == [(s["step"], s["index"]) for s in expected[rank]]
        assert {s["epoch"] for s in got[rank]} == {0, 1}  # the resumed run went on into the next epoch
    weights, reference = final_weights(cut), final_weights(tmp_path / "whole" / "ckpt")
    assert weights.keys() == reference.keys()
    for key, value in reference.items():
        assert torch.equal(weights[key], value), key  # model, optimizer and RNG resumed exactly too


def test_two_process_checkpoint_resumes_on_one_process_exactly_once(dataset_factory, tmp_path):
    root = dataset_factory(**TABULAR)
    ckpt = tmp_path / "run" / "ckpt"
    train(tmp_path, "run", root, 2, "--checkpoint-dir", ckpt, "--num-workers", 2, "--max-steps", 5)
    before = steps(tmp_path / "run" / "samples")
    log = tmp_path / "one" / "samples"
    done = train(tmp_path, "one", root, 1, "--checkpoint-dir", ckpt, "--num-workers", 1, "--resume", "required",
                 "--sample-log", log)
    assert "resumed from" in done.stdout
    after = steps(log)
    assert set(before) == {0, 1} and set(after) == {0}
    seen = [i for records in before.values() for s in records for i in s["index"]]
    assert len(seen) == 2 * 5 * 4  # two ranks, five steps of four samples
    seen += [i for s in after[0] for i in s["index"]]
    assert Counter(seen) == Counter(every_index(root)), "the epoch was not served exactly once"


SIGNAL_WHILE_IMPORTING = """
import os, runpy, signal, sys


class SignalAtTorchImport:  # SLURM's warning while the script still imports torch (seconds on a busy node)
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGUSR1)
        return None


sys.meta_path.insert(0, SignalAtTorchImport())
sys.argv = [{example!r}, *{args!r}]
runpy.run_path({example!r}, run_name="__main__")
"""


def test_a_stop_signal_while_the_script_starts_up_stops_it_at_the_first_step(dataset_factory, tmp_path):
    """A SIGUSR1 that comes while the example still imports torch is caught (Python's default would kill the
    process, and a SLURM job with it): the run checkpoints at its first step boundary and exits 0."""
    root = dataset_factory(**TABULAR)
    ckpt = tmp_path / "ckpt"
    args = ["--root", str(root), "--checkpoint-dir", str(ckpt), "--dummy", "--num-workers", "0", "--batch-size",
            "4", "--episode-pool-size", "2"]
    done = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_IMPORTING.format(example=str(EXAMPLE), args=args)],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "stopping at step 1 on SIGUSR1" in done.stdout
    assert (ckpt / "latest").read_text().strip() == "step-00000001"


SIGNAL_AS_IT_EXITS = """
import atexit, os, runpy, subprocess, sys

# SLURM's warning signal, again and again from the moment the script starts to exit until it is gone (60 s at most)
atexit.register(lambda: subprocess.Popen(
    ["timeout", "60", "sh", "-c", f"while kill -USR1 {{os.getpid()}} 2>/dev/null; do :; done"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
sys.argv = [{example!r}, *{args!r}]
runpy.run_path({example!r}, run_name="__main__")
"""


def test_a_stop_signal_as_the_script_exits_does_not_fail_it(dataset_factory, tmp_path):
    """A SIGUSR1 that comes after the run is done, while Python shuts down, is ignored: Python's exit puts back
    the default action (death: a SLURM job marked FAILED) for a caught signal, not for an ignored one."""
    root = dataset_factory(**TABULAR)
    args = ["--root", str(root), "--checkpoint-dir", str(tmp_path / "ckpt"), "--dummy", "--num-workers", "0",
            "--batch-size", "4", "--episode-pool-size", "2", "--max-steps", "2"]
    done = subprocess.run([sys.executable, "-c", SIGNAL_AS_IT_EXITS.format(example=str(EXAMPLE), args=args)],
                          capture_output=True, text=True, timeout=TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step-00000002"


PREEMPTED_JOB = """#!/bin/sh
#SBATCH --job-name=dl-train-preempt
#SBATCH --output={log}
#SBATCH --open-mode=append
#SBATCH --time=1
#SBATCH --signal=B:USR1@50
#SBATCH --requeue
#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=1 --mem=1024
echo "attempt $SLURM_RESTART_COUNT on $SLURMD_NODENAME"
exec {python} {example} --root {root} --checkpoint-dir {ckpt} --dummy --num-workers 1 --batch-size 4 \\
    --episode-pool-size 2 --step-sleep 1.8 --checkpoint-every 1000 --log-every 5 --sample-log {samples}
"""


def test_a_job_cut_by_its_time_limit_continues_from_its_checkpoint(cluster, dataset_factory, tmp_path):
    """--time=1 with --signal=B:USR1@50: slurmctld signals the job 10 to 40 s in (it checks time limits
    every 30 s, later on a busy machine); ~50 s of steps (27 of 1.8 s) cannot finish before that, so the job is
    cut at least once, and a signal that comes late still leaves time to checkpoint before the 60 s limit (the
    SIGTERM at the limit is caught and acted on the same way)."""
    root = dataset_factory(**TABULAR)
    work = tmp_path / "job"
    work.mkdir()
    log, ckpt, samples = work / "job.log", work / "ckpt", work / "samples"
    script = work / "job.sh"
    script.write_text(PREEMPTED_JOB.format(log=log, python=sys.executable, example=EXAMPLE, root=root, ckpt=ckpt,
                                           samples=samples))
    job = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=True)
    job_id = job.stdout.strip().split(";")[0]
    deadline, state = time.monotonic() + 300, {}
    while time.monotonic() < deadline:
        out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
        state = dict(f.split("=", 1) for f in out.split() if "=" in f)
        if state.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            break
        time.sleep(2)
    else:
        subprocess.run(["scancel", job_id])
        pytest.fail(f"the job did not complete in 300 s: {state}\n{log.read_text() if log.exists() else ''}")
    text = log.read_text()
    assert state["JobState"] == "COMPLETED", (f"{state.get('JobState')} exit {state.get('ExitCode')} "
                                              f"({state.get('Reason')})\n{text}\n{cluster.logs()}")
    assert int(state["Restarts"]) >= 1, text  # it was cut and requeued at least once
    assert "stopping at step" in text and "on SIGUSR1" in text and "requeue job" in text and "resumed from" in text
    attempts = steps(samples)[0]
    seen = [i for s in attempts for i in s["index"]]
    assert Counter(seen) == Counter(every_index(root)), "samples lost or repeated across the preemption"
    assert [s["step"] for s in attempts] == list(range(1, len(attempts) + 1))  # no step replayed or skipped
