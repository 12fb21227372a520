"""A rich progress bar for one benchmark run, driven by `dl.bench.runner.Progress` callbacks."""

from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def rich_progress(run_name: str):
    """Yield a `progress(phase, done, total)` callback that shows one bar per phase on stderr."""
    console = Console(stderr=True)
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
