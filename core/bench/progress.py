"""A rich progress bar for one benchmark run, driven by `dl.bench.runner.Progress` callbacks."""

from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


@contextmanager
def rich_progress(run_name: str):
    """Yield a `progress(phase, done, total)` callback that shows one bar per phase on stderr."""
    console = Console(stderr=True)
    columns = (TextColumn(f"[bold]{run_name}[/] {{task.description:<15}}"), BarColumn(),
               TextColumn("{task.completed:.0f}/{task.total:.0f}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        tasks: dict[str, int] = {}

        def update(phase: str, done: float, total: float) -> None:
            if phase not in tasks:
                for task in tasks.values():  # a new phase means earlier ones are done
                    bar.update(task, completed=bar.tasks[task].total)
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield update
