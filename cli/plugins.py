"""`dl plugins`: every registered plugin, and the plugins that failed to load."""

import json

import click
from rich.console import Console
from rich.table import Table

from dl.plugins_manager import get_plugins


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins(as_json):
    """List registered plugins: kind, name, providing distribution and version, description.

    Plugins come from the `dl` entry-point group; built-ins register the same way. Set
    DL_DISABLE_PLUGINS=name,... to block some, DL_STRICT_PLUGINS=1 to make a broken plugin fatal.
    """
    loaded = get_plugins()
    entries = loaded.registry.entries()
    if as_json:
        click.echo(json.dumps({
            "plugins": [{"kind": e.kind, "name": e.name, "distribution": e.distribution, "version": e.version,
                         "module": e.module, "description": e.description} for e in entries],
            "errors": loaded.errors,
        }, indent=2))
        return
    table = Table(title="dl plugins")
    for column in ("kind", "name", "distribution", "version", "description"):
        table.add_column(column)
    for e in entries:
        table.add_row(e.kind, e.name, e.distribution, e.version, e.description)
    console = Console()
    console.print(table)
    for error in loaded.errors:
        console.print(f"[red]failed to load:[/] {error}", highlight=False)
