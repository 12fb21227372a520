"""`dl run`'s progress without a terminal (`dl.bench.progress`): one line per phase event, each once; a phase reads
N/N only when it is done."""

import io

from rich.console import Console

from dl.bench import progress


def test_lines_without_a_terminal_print_each_count_once(monkeypatch):
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)  # a line at every call that says something new
    out = io.StringIO()
    with progress.rich_progress("run", Console(file=out)) as update:
        for done in (0, 1.2, 1.9, 3.7, 4, 4):
            update("single-process", done, 4)
        for done in (0.6, 1, 1):
            update("warm-up", done, 1)
        for done in (1.5, 1.6, 3.0):
            update("download MB", done, None)
    assert out.getvalue().splitlines() == [
        "run: single-process 0/4", "run: single-process 1/4", "run: single-process 3/4", "run: single-process 4/4",
        "run: warm-up 0/1", "run: warm-up 1/1", "run: download MB 2", "run: download MB 3"]
