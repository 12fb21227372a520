"""The `slurm` scheduler against a real SLURM cluster on localhost (tests/slurm_cluster.py: Debian's munge,
slurmctld and two slurmd): a serial chain with a failing link, a 2-node run with disjoint ranks, `dl status`,
cancellation, and a clear error for a request the cluster can never satisfy."""

import contextlib
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import dl_subprocess

from dl.bench.session import collect, plan_runs
from dl.bench.spec import RunSpec
from dl.contracts.errors import DlError
from dl.contracts.scheduler import Run
from dl.plugins.slurm import SlurmScheduler

pytestmark = pytest.mark.slow
QUICK = dict(duration=0.5, warmup_batches=1, single_proc_samples=2, batch_size=4, num_workers=0)
TABULAR = dict(episodes=6, frames_per_episode=(20, 40), cameras=0, episodes_per_file=3)
WAIT_S = 240


def wait_final(scheduler, submission, cluster, timeout_s=WAIT_S):
    statuses = scheduler.wait(submission, poll_s=1.0, timeout_s=timeout_s)
    if any(s.state not in ("done", "failed", "cancelled") for s in statuses):
        pytest.fail(f"jobs did not end within {timeout_s} s: {statuses}\n{cluster.logs()}")
    return statuses


def run_log(status) -> str:
    """A run's job log, for a failure message: what the runner said when a run that should end well did not."""
    path = Path(status.log_path or "")
    text = path.read_text(errors="replace") if path.is_file() else "(no log)"
    return f"--- {status.name}: {status.state} {status.detail}\n{text[-4000:]}"


def job_fields(job_id: str) -> dict:
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, check=True)
    return dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)


class Program(Run):
    """A run whose command is a small Python program (for cancellation: a run that waits to be cancelled)."""

    program = ""

    def command(self, rank=0, python=None):
        return [python or sys.executable, "-c", self.program, self.result_paths[rank]]


def test_a_chain_runs_in_order_and_a_failed_link_does_not_stop_it(cluster, dataset_factory, tmp_path):
    root = str(dataset_factory(**TABULAR))
    out = tmp_path / "out"
    specs = [RunSpec(root=root, name="first", **QUICK),
             RunSpec(root=str(tmp_path / "no-such-dataset"), name="broken", **QUICK),
             RunSpec(root=root, name="third", loader="pool", **QUICK)]
    scheduler = SlurmScheduler()
    submission = scheduler.submit(plan_runs(specs, out))
    jobs = submission.handle["jobs"]
    assert list(jobs) == ["first", "broken", "third"]
    statuses = wait_final(scheduler, submission, cluster)
    assert [(s.name, s.state) for s in statuses] == [("first", "done"), ("broken", "failed"), ("third", "done")], \
        "\n".join([*(run_log(s) for s in statuses if s.name != "broken"), cluster.logs()])
    assert statuses[1].exit_code == 1 and "FAILED" in statuses[1].detail
    assert "no-such-dataset" in Path(statuses[1].log_path).read_text()  # the runner's error, in its log
    fields = [job_fields(jobs[name]) for name in ("first", "broken", "third")]
    # serial: each starts after the one before ended; afterany: "third" ran although "broken" failed
    for earlier, later in zip(fields, fields[1:], strict=False):
        assert later["StartTime"] >= earlier["EndTime"], (earlier, later)
    results = collect(submission, statuses)
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    for status in statuses:
        assert Path(status.log_path).name == f"dl-{status.name}-{status.job_id}.out"
        assert Path(status.log_path).parent == out / "logs"


def test_dl_status_reports_the_chain_with_the_failed_links_log(cluster, dataset_factory, tmp_path):
    root = str(dataset_factory(**TABULAR))
    out = tmp_path / "out"
    quick = ["--duration", "0.5", "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4"]
    done = dl_subprocess("run", "--root", root, "--scheduler", "slurm", "--num-workers", "0,1", *quick,
                         "--out-dir", out, cache_dir=tmp_path / "cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "follow with: dl status" in done.stdout  # returned once queued
    submission = json.loads((out / "specs" / "submission.json").read_text())
    assert submission["scheduler"] == "slurm" and len(submission["handle"]["jobs"]) == 2
    followed = dl_subprocess("status", out, "--wait", "--poll", "1", cache_dir=tmp_path / "cache", timeout=WAIT_S)
    assert followed.returncode == 0, followed.stdout + followed.stderr
    for name, job in submission["handle"]["jobs"].items():
        assert name in followed.stdout and job in followed.stdout
    assert (out / "results.csv").is_file()
    assert all(json.loads((out / f"{n}.json").read_text())["status"] == "ok" for n in submission["handle"]["jobs"])


def test_two_nodes_run_disjoint_ranks_and_merge_like_local(cluster, dataset_factory, tmp_path):
    root = str(dataset_factory(**TABULAR))
    out, local = tmp_path / "slurm", tmp_path / "local"
    common = ["--root", root, "--num-workers", "1", "--loader-option", "episode_pool_size=2", "--duration", "1",
              "--warmup-batches", "1", "--single-proc-samples", "2", "--batch-size", "4"]
    done = dl_subprocess("run", "--scenario", "stream_slurm_2node", *common, "--resource", "cpus_per_task=1",
                         "--resource", "mem=512", "--resource", "time=5", "--wait", "--out-dir", out,
                         cache_dir=tmp_path / "cache", timeout=WAIT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    name = "stream_slurm_2node-cpu-single-w1-r2"
    ranks = [json.loads((out / f"{name}-rank{r}.json").read_text()) for r in range(2)]
    merged = json.loads((out / f"{name}.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1]
    assert sorted(r["environment"]["node"] for r in ranks) == ["node1", "node2"]  # one task per node
    log = next((out / "logs").glob("dl-*.out")).read_text()
    assert "rank 0 of 2 on node1" in log and "rank 1 of 2 on node2" in log
    assert "master 127.0.0.1" in log and "rendezvous store at 127.0.0.1:" in log
    # each rank's episodes, per epoch, are its own; together they are every episode
    for epoch in ranks[0]["episodes_by_epoch"]:
        mine = [set(r["episodes_by_epoch"].get(epoch, [])) for r in ranks]
        assert not mine[0] & mine[1], epoch
    assert merged["rank_disjointness"]["shared_episodes"] == 0
    assert all(r["loader_stats"]["episodes_admitted"] > 0 for r in ranks)
    assert merged["samples_per_s"] == pytest.approx(sum(r["samples_per_s"] for r in ranks), abs=0.01)
    assert merged["loader_stats"]["episodes_admitted"] == sum(r["loader_stats"]["episodes_admitted"] for r in ranks)

    # the same scenario on the local scheduler produces the same shape of results: ranks + one merged line
    done = dl_subprocess("run", "--scenario", "stream_slurm_2node", "--scheduler", "local", *common,
                         "--out-dir", local, cache_dir=tmp_path / "cache", timeout=WAIT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    local_merged = json.loads((local / f"{name}.json").read_text())
    assert set(local_merged) == set(merged)
    assert Counter(k for r in local_merged["ranks"] for k in r) == Counter(k for r in ranks for k in r)

    reported = dl_subprocess("report", local, out, "--plot", "--baseline", f"local/{name}",
                             cache_dir=tmp_path / "cache")
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert f"slurm/{name}" in reported.stdout and f"local/{name}" in reported.stdout
    assert "node1" in reported.stdout and "node2" in reported.stdout
    assert (local / "comparison.png").stat().st_size > 0 and (local / "throughput.png").stat().st_size > 0


MEET = """
import datetime, json, os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo", rank=int(os.environ["SLURM_PROCID"]), world_size=int(os.environ["SLURM_NTASKS"]),
                        timeout=datetime.timedelta(seconds=60))
total = torch.ones(1)
dist.all_reduce(total)
open(sys.argv[1], "w").write(json.dumps({"status": "ok", "sum": total.item(), "port": int(os.environ["MASTER_PORT"])}))
dist.destroy_process_group()  # as a run ends (dl.bench.runner): no gloo thread left running at exit
"""


def test_ranks_meet_although_the_port_of_the_job_id_is_taken(cluster, tmp_path):
    """Two jobs 20,000 ids apart on one node once computed the same port (20000 + jobid % 20000); the ranks now
    meet at a store their job's first node holds on a port the system picked. Here the port the old rule gives
    the next job is held by another process, and the 2-node job still meets."""
    import socket

    probe = subprocess.run(["sbatch", "--parsable", "--mem=64", "--output=/dev/null", "--wrap", "true"],
                           capture_output=True, text=True, check=True)
    last = int(probe.stdout.strip().split(";")[0])  # jobs are numbered one after another (--test-only takes one)
    candidates = range(last + 1, last + 5)
    (tmp_path / "specs").mkdir()
    run = Program("meet", 2, str(tmp_path / "specs" / "meet.json"), [str(tmp_path / f"meet-{r}.json") for r in (0, 1)],
                  {"nodes": 2, "tasks_per_node": 1, "cpus_per_task": 1, "mem": 512})
    run.program = MEET
    with contextlib.ExitStack() as held:
        taken = {20000 + i % 20000 for i in candidates}
        for port in taken:
            held.enter_context(socket.create_server(("", port)))
        scheduler = SlurmScheduler(chain=False)
        submission = scheduler.submit([run])
        assert int(submission.handle["jobs"]["meet"]) in candidates  # precondition: the old rule's port is taken
        statuses = wait_final(scheduler, submission, cluster)
    assert statuses[0].state == "done", Path(statuses[0].log_path).read_text()
    results = [json.loads(Path(p).read_text()) for p in run.result_paths]
    assert [r["sum"] for r in results] == [2.0, 2.0] and results[0]["port"] == results[1]["port"] not in taken


def test_cancelled_run_is_reported_and_later_links_still_run(cluster, tmp_path):
    def run(name, program):
        made = Program(name, 1, str(tmp_path / "specs" / f"{name}.json"), [str(tmp_path / f"{name}.json")],
                       {"nodes": 1, "tasks_per_node": 1, "cpus_per_task": 1, "mem": 256})
        made.program = program
        return made

    (tmp_path / "specs").mkdir()
    write_ok = "import sys, json; open(sys.argv[1], 'w').write(json.dumps({'name': 'after', 'status': 'ok'}))"
    runs = [run("waits", "import time; time.sleep(300)"), run("after", write_ok)]
    scheduler = SlurmScheduler()
    submission = scheduler.submit(runs)
    deadline = time.monotonic() + 60
    while scheduler.status(submission)[0].state != "running":
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.5)
    scheduler.cancel(submission, ["waits"])
    statuses = wait_final(scheduler, submission, cluster)
    assert [(s.name, s.state) for s in statuses] == [("waits", "cancelled"), ("after", "done")]
    with pytest.raises(DlError, match="no run named nope"):
        scheduler.cancel(submission, ["nope"])


@pytest.mark.parametrize(("resource", "reason"), [
    ({"nodes": 3, "tasks_per_node": 1}, "Node count specification invalid"),
    ({"mem": "100G"}, "Requested node configuration is not available"),
], ids=["nodes", "memory"])
def test_an_impossible_request_is_refused_before_anything_is_queued(cluster, dataset_factory, tmp_path, resource,
                                                                     reason):
    root = str(dataset_factory(**TABULAR))
    world = resource.get("nodes", 1)
    specs = [RunSpec(root=root, name="fine", **QUICK),
             RunSpec(root=root, name="huge", world_size=world, resources=resource, **QUICK)]
    before = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True).stdout
    with pytest.raises(DlError) as error:
        SlurmScheduler().submit(plan_runs(specs, tmp_path / "out"))
    message = str(error.value)
    assert "the cluster cannot run huge as asked" in message and reason in message
    assert "nothing was submitted" in message
    after = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i"], capture_output=True, text=True).stdout
    assert after == before


def test_dl_run_refuses_an_impossible_request_with_exit_2(cluster, dataset_factory, tmp_path):
    done = dl_subprocess("run", "--root", dataset_factory(**TABULAR), "--scheduler", "slurm", "--resource",
                         "mem=100G", "--out-dir", tmp_path / "out", cache_dir=tmp_path / "cache")
    assert done.returncode == 2
    assert "cannot run map-cpu-single-w2 as asked" in done.stderr and "mem=100G" in done.stderr
