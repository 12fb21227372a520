"""The `dl` command group: every command, and dl's own errors turned into click's (`Error: ...`, exit 2).
`dl.cli.main.main` runs it."""

import click

from dl import __version__

from .cache import cache
from .diagnose import diagnose
from .info import info
from .plugins import plugins
from .report import report
from .run import run
from .status import cancel, status
from .synthetic_dataset import synthetic_dataset
from .train import train
from .transcode import transcode
from .validate import validate


class DlGroup(click.Group):
    """Turns dl's own errors into click errors, so they print as `Error: message` and exit 2."""

    def invoke(self, ctx):
        from dl.contracts.errors import DlError

        try:
            return super().invoke(ctx)
        except DlError as exc:
            error = click.ClickException(str(exc))
            error.exit_code = 2
            raise error from None


@click.group(cls=DlGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="dl")
def cli():
    """dl: dataloading toolkit and benchmark for LeRobot v3.0 datasets.

    `dl run` benchmarks a loader on a dataset (with no --root: on an embedded synthetic dataset dl
    generates once); `dl status` / `dl cancel` follow or stop runs a cluster scheduler queued; `dl report`
    compares results of any runs. `dl plugins` lists the sources, loaders, decoders and schedulers installed.
    `dl info` summarizes a dataset, `dl validate` checks every file of it, `dl diagnose` walks the decode path
    of one frame per camera and says what breaks it. `dl transcode` re-encodes a dataset's videos (codec, GOP) into
    a new dataset, e.g. H.264 for a GPU whose NVDEC has no AV1. `dl train` runs LeRobot's own lerobot-train on
    dl's loaders; `dl cache` shows and clears what dl keeps in its cache folder.
    """


cli.add_command(run)
cli.add_command(plugins)
cli.add_command(info)
cli.add_command(validate)
cli.add_command(diagnose)
cli.add_command(synthetic_dataset)
cli.add_command(status)
cli.add_command(cancel)
cli.add_command(report)
cli.add_command(transcode)
cli.add_command(train)
cli.add_command(cache)

