"""The scheduler contract: submit then status, a JSON-able submission, and the host's collection of
results (the merge of ranks by the loader's declared rules, a run that died without a result)."""

import json
import sys

import pytest

from dl.bench.results import merge_ranks, merge_stats
from dl.bench.session import collect, plan_runs
from dl.bench.spec import RunSpec
from dl.contracts.scheduler import Run, Submission
from dl.plugins.local_scheduler import LocalScheduler


def test_submission_round_trips_through_json(tmp_path):
    runs = plan_runs([RunSpec(root="/data", name="a"), RunSpec(root="/data", name="b", world_size=2)], tmp_path)
    assert [r.result_paths for r in runs] == [[str(tmp_path / "a.json")],
                                              [str(tmp_path / "b-rank0.json"), str(tmp_path / "b-rank1.json")]]
    assert json.loads((tmp_path / "specs" / "b.json").read_text())["world_size"] == 2
    submission = Submission("local", runs, {"exit_codes": {"a": 0}})
    submission.save(tmp_path / "submission.json")
    assert Submission.from_dict(json.loads((tmp_path / "submission.json").read_text())) == submission


def test_result_config_redacts_secret_options_and_the_spec_keeps_them():
    options = {"storage_options": {"key": "AK", "secret": "SK", "client_kwargs": {"session_token": "T"},
                                   "endpoint_url": "http://127.0.0.1:9"}, "cache_bytes": 5}
    spec = RunSpec(root="s3://b/d", source="bucket", source_options=options, loader_options={"api_key": "x"})
    public = spec.public_dict()
    assert public["source_options"] == {"storage_options": {"key": "<redacted>", "secret": "<redacted>",
                                                            "client_kwargs": {"session_token": "<redacted>"},
                                                            "endpoint_url": "http://127.0.0.1:9"},
                                        "cache_bytes": 5}
    assert public["loader_options"] == {"api_key": "<redacted>"} and public["root"] == "s3://b/d"
    assert RunSpec.from_dict(spec.to_dict()).source_options == options


def test_run_command_launches_the_runner():
    run = Run("a", 1, "/s/a.json", ["/r/a.json"])
    assert run.command(0, python="py") == ["py", "-m", "dl.bench.runner", "/s/a.json", "/r/a.json"]


class _Fake(Run):
    """A run whose command is a small Python program instead of a benchmark."""

    program = ""

    def command(self, rank=0, python=None):
        return [sys.executable, "-c", self.program, self.result_paths[rank]]


@pytest.mark.parametrize(("program", "state", "detail"), [
    ("import sys, json; open(sys.argv[1], 'w').write(json.dumps({'name': 'x', 'status': 'ok'}))", "done", None),
    ("import sys; sys.exit(3)", "failed", None),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "failed", "killed by signal SIGKILL"),
])
def test_local_submit_then_status(tmp_path, program, state, detail):
    run = _Fake("x", 1, str(tmp_path / "spec.json"), [str(tmp_path / "x.json")])
    run.program = program
    scheduler = LocalScheduler()
    submission = scheduler.submit([run])
    (status,) = scheduler.wait(submission)
    assert (status.state, status.detail) == (state, detail)
    (result,) = collect(submission, [status])
    if state == "done":
        assert result["status"] == "ok"
    else:
        assert result["status"] == "failed"
        assert result["error"] == f"the run process ended ({detail or 'exit status 3'}) without writing a result"


MEET = """
import datetime, json, os, sys
import psutil, torch, torch.distributed as dist
port = int(os.environ["MASTER_PORT"])
listening = {c.laddr.port for c in psutil.Process().parent().net_connections() if c.status == psutil.CONN_LISTEN}
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                        timeout=datetime.timedelta(seconds=60))
total = torch.ones(1)
dist.all_reduce(total)
open(sys.argv[1], "w").write(json.dumps({"sum": total.item(), "port": port, "held_by_launcher": port in listening,
                                         "agent_store": os.environ.get("TORCHELASTIC_USE_AGENT_STORE")}))
dist.destroy_process_group()  # as a run ends (dl.bench.runner): no gloo thread left running at exit
"""


@pytest.mark.slow  # starts processes (dl, spawned workers, servers)
def test_local_ranks_meet_at_a_store_the_scheduler_holds(tmp_path):
    """No free-port race: the port the ranks get is bound by the scheduler's own process for the whole run (a
    free port found by binding 0 and closing it could be taken before rank 0 binds it)."""
    run = _Fake("meet", 2, str(tmp_path / "spec.json"), [str(tmp_path / f"meet-{r}.json") for r in (0, 1)])
    run.program = MEET
    scheduler = LocalScheduler(timeout_s=120)
    (status,) = scheduler.wait(scheduler.submit([run]))
    assert status.state == "done", status
    results = [json.loads(open(p).read()) for p in run.result_paths]
    assert [r["sum"] for r in results] == [2.0, 2.0]
    assert all(r["held_by_launcher"] and r["agent_store"] == "True" for r in results)
    assert results[0]["port"] == results[1]["port"]


def test_local_timeout_is_a_failed_run(tmp_path):
    run = _Fake("slow", 1, str(tmp_path / "spec.json"), [str(tmp_path / "slow.json")])
    run.program = "import time; time.sleep(30)"
    (status,) = LocalScheduler(timeout_s=0.5).wait(LocalScheduler(timeout_s=0.5).submit([run]))
    assert status.state == "failed" and status.detail == "timed out after 0.5 s"


def test_merge_uses_the_rules_the_loader_declared():
    rules = {"admitted": "sum", "longest": "max", "ideal": "mean", "size": "same"}
    stats = [{"admitted": 3, "longest": 0.5, "ideal": 0.5, "size": 8, "label": "a"},
             {"admitted": 4, "longest": 0.2, "ideal": 0.7, "size": 8, "label": "b"}]
    assert merge_stats(stats, rules) == {"admitted": 7, "longest": 0.5, "ideal": 0.6, "size": 8, "label": None}


def test_merge_ranks_sums_throughput_and_merges_loader_stats():
    def rank(r, sps, admitted):
        return {"name": f"run-rank{r}", "status": "ok", "samples_per_s": sps, "first_batch_latency_s": 0.1 * (r + 1),
                "fetch_pct": 40.0 + r, "video_decoder_cache": {"hits": 1, "misses": 1, "evictions": 0, "open": 1},
                "loader_stats": {"admitted": admitted}, "loader_stats_merge": {"admitted": "sum"}}

    merged = merge_ranks("run", [rank(0, 100.0, 3), rank(1, 50.0, 4)])
    assert (merged["samples_per_s"], merged["first_batch_latency_s"], merged["fetch_pct"]) == (150.0, 0.2, 40.5)
    assert merged["loader_stats"] == {"admitted": 7} and merged["video_decoder_cache"]["hits"] == 2


def test_merge_of_a_failed_rank_is_failed():
    merged = merge_ranks("run", [{"name": "run-rank0", "status": "ok"},
                                 {"name": "run-rank1", "status": "failed", "error": "boom"}])
    assert merged["status"] == "failed" and merged["error"] == "run-rank1: boom"



def test_status_table_prints_a_detail_with_brackets_as_written(tmp_path):
    from rich.console import Console

    from dl.cli.status import render_statuses
    from dl.contracts.scheduler import RunStatus

    runs = plan_runs([RunSpec(root="/data", name="run[1]")], tmp_path)
    console = Console(record=True, width=300)
    detail = "killed: frames [height, width] expected"
    render_statuses(Submission("local", runs), [RunStatus("run[1]", "failed", 1, detail=detail)], console)
    text = console.export_text()
    assert detail in text and "run[1]" in text
