"""`dl`: the command group. dl's own errors print as one red message and exit 2, without a traceback."""

import sys

import click
from rich.console import Console

from dl import __version__
from dl.errors import DlError

from .info import info
from .plugins import plugins
from .report import report
from .run import run
from .status import cancel, status
from .synthetic_dataset import synthetic_dataset


class DlGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except DlError as exc:
            Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
            sys.exit(2)


@click.group(cls=DlGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="dl")
def cli():
    """dl: dataloading toolkit and benchmark for LeRobot v3.0 datasets.

    `dl run` benchmarks a loader on a dataset (with no --root: on an embedded synthetic dataset dl
    generates once); `dl status` / `dl cancel` follow or stop runs a cluster scheduler queued; `dl report`
    compares results of any runs. `dl plugins` lists the sources, loaders, decoders and schedulers installed.
    """


cli.add_command(run)
cli.add_command(plugins)
cli.add_command(info)
cli.add_command(synthetic_dataset)
cli.add_command(status)
cli.add_command(cancel)
cli.add_command(report)


def main():
    """Console-script entry point."""
    cli(prog_name="dl")
