"""Progress of one benchmark run, driven by `dl.bench.phase.Progress` callbacks: live bars on a terminal,
plain lines otherwise (a CI log, a pipe, a SLURM output file), so progress shows as it happens."""

import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

LINE_EVERY_S = 5.0
"""Without a terminal, a phase in progress prints a line at most this often."""


@contextmanager
def rich_progress(run_name: str, console: Console | None = None):
    """Yield a `progress(phase, done, total)` callback that reports on stderr: one bar per phase on a terminal,
    else a line when a phase starts and ends and every `LINE_EVERY_S` seconds in between."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield _line_reporter(run_name, console)
        return
    columns = (TextColumn(f"[bold]{run_name}[/] {{task.description:<15}}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())  # M/? while the total is unknown (downloads)
    with Progress(*columns, console=console, transient=False) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: float, total: float | None) -> None:
            if phase not in tasks:
                for name, task in tasks.items():  # a new phase means earlier ones are done
                    if not name.startswith("download"):  # (downloads run beside the phases)
                        bar.update(task, completed=bar.tasks[task].total)
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update


def _line_reporter(run_name: str, console: Console):
    """Lines per phase: when it starts, when it reaches its total, and every `LINE_EVERY_S` seconds in between,
    each line once (counts of a total print rounded down: a phase reads N/N only when done); a count with no known
    total (None: a download's megabytes) prints as a count alone."""
    state: dict = {"last": {}, "printed": {}, "finished": set()}

    def update(phase: str, done: float, total: float | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total and phase not in state["finished"]
        last = state["last"].get(phase)
        if last is None or finished or now - last >= LINE_EVERY_S:
            count = f"{done:.0f}" if total is None else f"{int(done)}/{total:.0f}"
            if finished:
                state["finished"].add(phase)
                count = f"{total:.0f}/{total:.0f}"
            state["last"][phase] = now
            if state["printed"].get(phase) != count:
                console.print(f"{run_name}: {phase} {count}", highlight=False, soft_wrap=True)
                state["printed"][phase] = count

    return update
