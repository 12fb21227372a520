"""`dl status OUT_DIR` and `dl cancel OUT_DIR`: follow or stop the runs a `dl run` submitted (its
`OUT_DIR/specs/submission.json`), through the scheduler plugin that took them."""

import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .console import make_console

STATE_STYLE = {"pending": "yellow", "running": "cyan", "done": "green", "failed": "bold red", "cancelled": "magenta"}


def log_tail(path: str | None, lines: int) -> str:
    """The last `lines` lines of a log file ("" when it does not exist)."""
    if not path or not Path(path).is_file():
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def render_statuses(submission, statuses, console: Console, log_lines: int = 15) -> None:
    """One row per run (job id, state, exit code, detail, log, results); a failed run's log tail under it."""
    table = Table(title=f"{submission.scheduler} submission", header_style="bold")
    for column in ("run", "job", "state", "exit", "detail", "log", "results"):
        table.add_column(column, overflow="fold")
    for run, status in zip(submission.runs, statuses, strict=True):
        written = sum(Path(p).is_file() for p in run.result_paths)
        table.add_row(escape(run.name), escape(status.job_id or "-"),
                      f"[{STATE_STYLE.get(status.state, '')}]{status.state}[/]",
                      "-" if status.exit_code is None else str(status.exit_code), escape(status.detail or ""),
                      escape(str(status.log_path or "-")),
                      escape(f"{written}/{len(run.result_paths)} in {Path(run.result_paths[0]).parent}"))
    console.print(table)
    for status in statuses:
        tail = log_tail(status.log_path, log_lines) if status.state == "failed" else ""
        if tail:
            console.print(f"[bold red]{escape(status.name)}[/] failed; last lines of {escape(str(status.log_path))}:",
                          highlight=False)
            console.print(tail, markup=False, highlight=False)


def follow(scheduler, submission, console: Console, poll_s: float) -> list:
    """Poll until every run is final, printing each change of state; the final statuses."""
    from dl.contracts.scheduler import FINAL_STATES

    seen: dict[str, str] = {}
    while True:
        statuses = scheduler.status(submission)
        for status in statuses:
            if seen.get(status.name) != status.state:
                seen[status.name] = status.state
                job = f" (job {status.job_id})" if status.job_id else ""
                console.print(f"{time.strftime('%H:%M:%S')} {escape(status.name + job)}: "
                              f"[{STATE_STYLE.get(status.state, '')}]{status.state}[/]", highlight=False)
        if all(s.state in FINAL_STATES for s in statuses):
            return statuses
        time.sleep(poll_s)


def _scheduler(submission):
    from dl.host.manager import get_plugins

    return get_plugins().registry.create("scheduler", submission.scheduler)


@click.command(epilog="\b\nExamples:\n  dl run --scheduler slurm --scenario mmap_local,stream_local --out-dir r\n"
               "  dl status r            # states, exit codes, logs, results\n"
               "  dl status r --wait     # until every run ended, then results.csv and the table")
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--wait", is_flag=True, help="Poll until every run has ended.")
@click.option("--poll", "poll_s", type=click.FloatRange(0.1), default=5.0, show_default=True,
              help="Seconds between polls with --wait.")
@click.option("--log-lines", type=click.IntRange(0), default=15, show_default=True,
              help="Lines of a failed run's log to show.")
def status(out_dir, wait, poll_s, log_lines):
    """Where the runs of a `dl run` stand: each run's job, state, exit code, log and result files; a
    failed run's log tail. Once every run has ended, its results are collected (ranks merged) into
    OUT_DIR/results.csv and shown; exit status 1 when a run failed."""
    from dl.bench.session import finish, load_submission
    from dl.contracts.scheduler import FINAL_STATES

    from .render import render_results

    console = make_console()
    submission = load_submission(Path(out_dir))
    scheduler = _scheduler(submission)
    statuses = follow(scheduler, submission, console, poll_s) if wait else scheduler.status(submission)
    render_statuses(submission, statuses, console, log_lines)
    if not all(s.state in FINAL_STATES for s in statuses):
        console.print(f"still running; follow with: dl status {out_dir} --wait", highlight=False, markup=False)
        return
    results, in_folder = finish(submission, statuses, Path(out_dir))
    render_results(results, console)
    console.print(f"results: {Path(out_dir) / 'results.csv'} lists all {in_folder} result(s) in {out_dir}/",
                  highlight=False, soft_wrap=True, markup=False)
    if any(r.get("status") != "ok" for r in results):
        sys.exit(1)


@click.command()
@click.argument("out_dir", type=click.Path(file_okay=False, exists=True))
@click.argument("runs", nargs=-1)
def cancel(out_dir, runs):
    """Cancel the runs of a `dl run` (all, or the named RUNS) that have not ended. With the slurm
    scheduler the later links of the chain still run (they depend afterany)."""
    from dl.bench.session import load_submission

    submission = load_submission(Path(out_dir))
    _scheduler(submission).cancel(submission, list(runs) or None)
    make_console().print(f"cancelled {', '.join(runs) if runs else 'every run'} of {out_dir}", highlight=False)
