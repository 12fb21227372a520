"""`dl plugins`: every registered plugin with its options, and the plugins that failed to load."""

import json

import click
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from .console import make_console


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def plugins(as_json):
    """List registered plugins: kind, name, providing distribution and version, description, options (with their
    defaults; set them with --source-option / --loader-option / --decoder-option / --scheduler-option
    KEY=VALUE), description.

    Plugins come from the `dl` entry-point group; built-ins register the same way. Set
    DL_DISABLE_PLUGINS=name,... to block some, DL_STRICT_PLUGINS=1 to make a broken plugin fatal.
    """
    from dl.host.manager import get_plugins

    loaded = get_plugins()
    entries = loaded.registry.entries()
    if as_json:
        click.echo(json.dumps({
            "plugins": [{"kind": e.kind, "name": e.name, "distribution": e.distribution, "version": e.version,
                         "module": e.module, "description": e.description,
                         "options": [o.to_dict() for o in e.options.options],
                         "accepts_any_option": e.options.open} for e in entries],
            "errors": loaded.errors,
        }, indent=2))
        return
    console = make_console()
    console.print("[bold]dl plugins[/]: set an option with --source-option / --loader-option / --decoder-option / "
                  "--scheduler-option KEY=VALUE", highlight=False)
    for e in entries:  # a block per plugin, wrapped at spaces: no option's value is cut, however narrow the output
        console.print()
        console.print(f"[bold]{e.kind} {e.name}[/] ({e.distribution} {e.version}): {escape(e.description)}",
                      highlight=False)
        console.print(Padding(Text(f"options: {e.options.describe()}"), (0, 0, 0, 2), expand=False), highlight=False)
    for error in loaded.errors:
        console.print(f"[red]failed to load:[/] {escape(error)}", highlight=False)
