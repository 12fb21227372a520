"""`dl diagnose`: isolate the decode path of one frame per camera and say what is wrong and how to fix it."""

import json
import sys

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .console import make_console
from .options import plugin_options


@click.command()
@click.option("--root", help="Dataset root for the source (a folder for --source local).")
@click.option("--repo-id", help="A Hub dataset repo, owner/name (same as --source hub --root hf://datasets/owner/name).")
@click.option("--source", default=None, help="Source plugin that reads the dataset [local; hub with --repo-id].")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin.")
@click.option("--decoder", default="cpu", show_default=True, help="Decoder plugin to test (cpu, nvdec, ...).")
@click.option("--decoder-option", multiple=True, metavar="KEY=VALUE", help="An option of the decoder plugin.")
@click.option("--episode", type=int, help="Episode whose videos to try [the first one with all its files].")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis as JSON.")
@click.option("--verbose", is_flag=True, help="Also show each video file's first bytes when they are a container's.")
def diagnose(root, repo_id, source, source_option, decoder, decoder_option, episode, as_json, verbose):
    """Decode one frame per camera of one episode, step by step: resolve the dataset through its source, find
    each video file, read its first bytes (is it a video container at all?), create the decoder, probe the
    stream, decode the episode's first frame and check its timestamp. Prints torch, torchcodec and FFmpeg
    library versions, the codec and GOP found in each file against info.json, and a verdict with the fix.
    Exits 1 when a step fails. It checks one episode: `dl validate` checks every file."""
    from dl.cli.diagnosis import diagnose as run_diagnosis

    if bool(root) == bool(repo_id):
        raise click.UsageError("give --root or --repo-id (one of them)")
    if repo_id:
        root, source = f"hf://datasets/{repo_id}", source or "hub"
    source = source or "local"
    found = run_diagnosis(root, source, plugin_options("source", source, source_option, "--source-option"), decoder,
                          plugin_options("decoder", decoder, decoder_option, "--decoder-option"), episode,
                          verbose=verbose)
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
    else:
        _render(found, make_console())
    if not found.ok:
        sys.exit(1)


def _render(found, console: Console) -> None:
    versions = ", ".join(f"{k} {v}" for k, v in found.versions.items() if v)
    console.print(f"[bold]versions[/] {escape(versions)}", highlight=False)
    table = Table(title="decode path", header_style="bold")
    for column in ("step", "", "found"):
        table.add_column(column, overflow="fold")
    for step in found.steps:
        table.add_row(escape(step.name), "[green]ok[/]" if step.ok else "[red]failed[/]", escape(step.detail))
    console.print(table)
    colour = "green" if found.ok else "red"
    console.print(f"[bold {colour}]verdict[/] {escape(found.verdict)}", highlight=False)
    if found.not_checked:
        console.print(f"[bold]not checked[/] {escape(found.not_checked)}", highlight=False)
    for line in found.advice:
        console.print(f"[bold yellow]GPU[/] {escape(line)}", highlight=False)
