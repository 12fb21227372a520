"""The consoles dl's commands print through: a terminal's width on a terminal; elsewhere (a file, a pipe, a SLURM
log) wide enough that no table or line is wrapped (or $COLUMNS wide when set), and every line without trailing
spaces (rich pads a table's title and cells to its width)."""

import os
import sys

from rich.console import Console

UNWRAPPED_WIDTH = 1000
"""The width of a console that is not a terminal: lines are as long as their content, not cut at 80 columns."""


class TrimmedLines:
    """A text stream that writes each line to `out` without its trailing spaces."""

    def __init__(self, out):
        self.out, self.pending = out, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.out.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.out.write(self.pending.rstrip())
            self.pending = ""
        self.out.flush()

    def isatty(self) -> bool:
        return False


def make_console(stderr: bool = False) -> Console:
    """A rich Console on stdout (or `stderr`) for dl's output."""
    out = Console(stderr=stderr)
    if out.is_terminal:
        return out
    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else UNWRAPPED_WIDTH
    return Console(file=TrimmedLines(sys.stderr if stderr else sys.stdout), width=width)
