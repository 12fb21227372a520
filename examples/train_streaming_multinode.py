"""Train on dl's streaming `pool` loader with Accelerate, on one or many processes and nodes, and survive
preemption: the dataset state is checkpointed with the model, a resume continues exactly (the same samples
an uninterrupted run would see), also on another number of processes or workers (elastic: the rest of the
epoch exactly once), and under SLURM the job checkpoints on the warning signal and requeues itself.

    pip install 'dl[train]'   # accelerate
    # one process
    python examples/train_streaming_multinode.py --root DATASET --checkpoint-dir ckpt
    # 2 processes on this machine (gloo on CPU, NCCL on GPUs)
    torchrun --standalone --nproc-per-node 2 examples/train_streaming_multinode.py --root DATASET --checkpoint-dir ckpt
    # SLURM, 2 nodes: one task per node; rank/world size from SLURM_PROCID/SLURM_NTASKS
    #   #SBATCH --nodes=2 --ntasks-per-node=1 --signal=USR1@60 --requeue --open-mode=append
    #   export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29500
    #   srun python examples/train_streaming_multinode.py --root DATASET --checkpoint-dir ckpt --resume auto

The DataLoader is NOT passed to `accelerator.prepare`: the `pool` loader already gives each rank a disjoint
share of the episodes, and accelerate would keep only every world_size-th batch of it. Ranks step in
lockstep: each step they agree (one all-reduce) whether anyone still has data and whether a stop was
asked; a rank whose share ran out takes a zero-loss step so DDP's collectives still match, and the epoch
ends when every rank's share is done, so no frame is dropped.

Checkpoint (every `--checkpoint-every` steps, on SIGUSR1/SIGTERM, and at `--max-steps`): `STEP/` with
accelerate's state (model, optimizer, RNG), `loader.json` (every rank's `state_dict()` merged by
`dl.merge_states`) and `progress.json`; `latest` names the newest complete one.
`--sample-log DIR` appends each step's sample indices per rank (`rankR.jsonl`), what the tests compare.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)


class StopRequest:
    """The first SIGUSR1 or SIGTERM this process gets (SLURM's warning before a time limit or a preemption),
    caught from the script's first lines, before it imports torch, accelerate and dl (seconds on a busy node:
    a signal then would kill the process, Python's default for SIGUSR1): a signal that comes while the job is
    still starting up is acted on at the first step boundary."""

    def __init__(self):
        self.signal: str | None = None
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._record)

    def _record(self, signum, frame) -> None:
        self.signal = self.signal or signal.Signals(signum).name


STOP = StopRequest()

import torch  # noqa: E402 (imported once the stop signals are caught: see StopRequest)
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402

import dl  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True, help="LeRobot v3.0 dataset root")
    parser.add_argument("--checkpoint-dir", required=True, type=Path)
    parser.add_argument("--dummy", action="store_true", help="dataloading only: no model, no optimizer")
    parser.add_argument("--epochs", type=int, default=1, help="epochs to train in all [1]")
    parser.add_argument("--max-steps", type=int, default=None, help="stop (after a checkpoint) at this global step")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--episode-pool-size", type=int, default=8)
    parser.add_argument("--episodes", type=str, default=None, help="episode indices, e.g. 0,3-6 [all]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints")
    parser.add_argument("--log-every", type=int, default=10, help="steps between frames/s lines")
    parser.add_argument("--resume", choices=("auto", "never", "required"), default="auto",
                        help="auto: from CHECKPOINT_DIR/latest when it exists; required: fail without one")
    parser.add_argument("--sample-log", type=Path, default=None, help="append each step's sample indices here")
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds of simulated compute per step")
    return parser.parse_args(argv)


def export_ranks() -> None:
    """Accelerate reads RANK / WORLD_SIZE (torchrun, accelerate launch); under `srun` only SLURM_PROCID /
    SLURM_NTASKS are set, so translate them (`dl.resolve_ranks`) before it starts."""
    if "RANK" in os.environ:
        return
    ranks = dl.resolve_ranks()
    if ranks.world_size == 1:
        return
    if "MASTER_ADDR" not in os.environ:
        sys.exit("MASTER_ADDR is not set: export the first node's address (and MASTER_PORT) before srun.")
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE", "").split("(")[0] or str(ranks.world_size)
    os.environ.update(RANK=str(ranks.rank), WORLD_SIZE=str(ranks.world_size), LOCAL_RANK=str(ranks.local_rank),
                      LOCAL_WORLD_SIZE=per_node)
    os.environ.setdefault("MASTER_PORT", "29500")


class TinyPolicy(torch.nn.Module):
    """observation.state [B, S] -> action [B, A], an MLP: enough to make the checkpoint a real model."""

    def __init__(self, state_dim: int, action_dim: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(state_dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, action_dim))

    def forward(self, state):
        return self.net(state)


class Trainer:
    def __init__(self, args, accelerator, stop: StopRequest):
        self.args, self.accelerator, self.stop = args, accelerator, stop
        self.rank, self.world_size = accelerator.process_index, accelerator.num_processes
        episodes = dl_episodes(args.episodes)
        self.dataset = dl.make_dataset(args.root, loader="pool", seed=args.seed, episodes=episodes,
                                       loader_options={"episode_pool_size": args.episode_pool_size},
                                       image_dtype="uint8")
        self.loader = dl.make_dataloader(self.dataset, batch_size=args.batch_size, num_workers=args.num_workers)
        self.model = self.optimizer = None
        if not args.dummy:
            set_seed(args.seed)  # the same initial weights on every rank and in every run of this seed
            features = self.dataset.meta.features
            self.state_dim = features["observation.state"]["shape"][0]
            model = TinyPolicy(self.state_dim, features["action"]["shape"][0])
            optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
            self.model, self.optimizer = accelerator.prepare(model, optimizer)  # not the DataLoader
        self.step = 0
        self.log = open(args.sample_log / f"rank{self.rank}.jsonl", "a") if args.sample_log else None  # noqa: SIM115

    # ------------------------------------------------------------------------------------ one step
    def train_step(self, batch) -> None:
        if self.model is None:
            return
        if batch is None:  # this rank's share is done: a step that changes nothing, so DDP stays in lockstep
            loss = self.model(torch.zeros(1, self.state_dim)).sum() * 0.0
        else:
            state, action = batch["observation.state"].float(), batch["action"].float()
            loss = torch.nn.functional.mse_loss(self.model(state), action)
        self.optimizer.zero_grad()
        self.accelerator.backward(loss)
        self.optimizer.step()

    def agree(self, has_batch: bool) -> tuple[bool, bool]:
        """(does any rank still have data, was a stop asked on any rank), the same on every rank."""
        flags = torch.tensor([int(has_batch), int(self.stop.signal is not None)])
        if self.world_size > 1:
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        return bool(flags[0]), bool(flags[1])

    # ------------------------------------------------------------------------------------ checkpoints
    def save(self) -> Path:
        states = [None] * self.world_size
        if self.world_size > 1:
            torch.distributed.all_gather_object(states, self.loader.state_dict())
        else:
            states = [self.loader.state_dict()]
        target = self.args.checkpoint_dir / f"step-{self.step:08d}"
        if self.model is not None:
            self.accelerator.save_state(str(target))
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            target.mkdir(parents=True, exist_ok=True)
            (target / "loader.json").write_text(json.dumps(dl.merge_states(states)))
            (target / "progress.json").write_text(json.dumps({"step": self.step, "world_size": self.world_size}))
            pointer = self.args.checkpoint_dir / "latest.tmp"
            pointer.write_text(target.name)
            os.replace(pointer, self.args.checkpoint_dir / "latest")  # the newest complete checkpoint
            print(f"checkpoint {target} (step {self.step})", flush=True)
        self.accelerator.wait_for_everyone()
        return target

    def resume(self) -> None:
        latest = self.args.checkpoint_dir / "latest"
        if self.args.resume == "never" or not latest.is_file():
            if self.args.resume == "required":
                sys.exit(f"--resume required, but {latest} does not exist")
            return
        source = self.args.checkpoint_dir / latest.read_text().strip()
        if self.model is not None:
            self.accelerator.load_state(str(source))
        self.loader.load_state_dict(json.loads((source / "loader.json").read_text()))
        self.step = json.loads((source / "progress.json").read_text())["step"]
        if self.accelerator.is_main_process:
            print(f"resumed from {source} at step {self.step}, epoch {self.dataset.epoch}", flush=True)

    # ------------------------------------------------------------------------------------ the loop
    def run(self) -> int:
        args = self.args
        self.resume()
        window_t, window_n = time.perf_counter(), 0
        while self.dataset.epoch < args.epochs:
            epoch = self.dataset.epoch
            iterator = iter(self.loader)
            while True:
                batch = next(iterator, None)
                anyone, stop = self.agree(batch is not None)
                if not anyone:
                    break  # every rank finished its share of this epoch
                self.train_step(batch)
                if args.step_sleep:
                    time.sleep(args.step_sleep)
                self.step += 1
                if batch is not None:
                    window_n += len(batch["index"])
                    if self.log:
                        self.log.write(json.dumps({"step": self.step, "epoch": epoch,
                                                   "index": batch["index"].tolist()}) + "\n")
                        self.log.flush()
                if self.step % args.log_every == 0:
                    window_t, window_n = self.log_rate(epoch, window_t, window_n)
                at_max = args.max_steps is not None and self.step >= args.max_steps
                if stop or at_max or self.step % args.checkpoint_every == 0:
                    self.save()
                if stop:
                    return self.preempted()
                if at_max:
                    return 0
        self.save()
        if self.accelerator.is_main_process:
            print(f"done: {self.step} steps, {args.epochs} epoch(s)", flush=True)
        return 0

    def log_rate(self, epoch: int, since: float, samples: int) -> tuple[float, int]:
        """Frames/s of each process and in total since the last line (one gather)."""
        now = time.perf_counter()
        rate = samples / max(now - since, 1e-9)
        rates = [rate]
        if self.world_size > 1:
            rates = [None] * self.world_size
            torch.distributed.all_gather_object(rates, rate)
        if self.accelerator.is_main_process:
            each = ", ".join(f"rank {r}: {v:.1f}" for r, v in enumerate(rates))
            print(f"step {self.step} epoch {epoch}: {sum(rates):.1f} frames/s in total ({each})",
                  flush=True)
        return now, 0

    def preempted(self) -> int:
        """Checkpointed after a stop signal: under SLURM, requeue this job (it restarts with --resume auto)."""
        job = os.environ.get("SLURM_JOB_ID")
        if self.accelerator.is_main_process:
            print(f"stopping at step {self.step} on {self.stop.signal or 'a peer signal'}", flush=True)
            if job:
                done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
                print(f"requeue job {job}: {'ok' if done.returncode == 0 else done.stderr.strip()}", flush=True)
        return 0


def dl_episodes(text):
    if not text:
        return None
    from dl.cli.options import parse_episodes

    return parse_episodes(text)


def main(argv=None) -> int:
    stop = STOP  # acted on at a step boundary, on every rank
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    export_ranks()

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    if args.sample_log:
        args.sample_log.mkdir(parents=True, exist_ok=True)
    code = Trainer(args, accelerator, stop).run()
    for sig in STOP_SIGNALS:  # nothing left to stop; and as Python exits it restores the default action (death,
        signal.signal(sig, signal.SIG_IGN)  # and a FAILED job) for caught signals, but leaves ignored ones ignored
    accelerator.end_training()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main())
