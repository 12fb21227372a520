"""`dl`'s entry point and its error handling. Every failure prints one line in click's style (`Error: ...`) and
exits non-zero, without a traceback: dl's own errors and bad options exit 2, Ctrl-C 130, SIGTERM 143 (run processes
and their DataLoader workers are stopped first). Ctrl-C and SIGTERM are handled from before the command group and its
commands are imported (`dl.cli.commands`, seconds on a busy machine), so an interrupt during that start-up is clean
too."""

import sys


def main():
    """Console-script entry point."""
    from dl.bench.signals import Terminated, stop_once_on_signals
    from dl.contracts.errors import show_warnings_as_lines

    stop_once_on_signals()
    show_warnings_as_lines()  # dl's warnings as one `warning: ...` line each
    try:
        _run()
    except KeyboardInterrupt:
        print("Error: interrupted (Ctrl-C); runs in progress were stopped.", file=sys.stderr)
        sys.exit(130)
    except Terminated:
        print("Error: terminated (SIGTERM); runs in progress were stopped.", file=sys.stderr)
        sys.exit(143)


def _run() -> None:
    import click

    from .commands import cli

    try:
        cli.main(prog_name="dl", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click's word for a Ctrl-C at a prompt
        raise KeyboardInterrupt from None


def __getattr__(name: str):
    if name == "cli":  # the command group, imported on first use (`from dl.cli.main import cli`)
        from .commands import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
