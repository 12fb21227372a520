"""`dl synthetic-dataset`: write a synthetic LeRobot v3.0 dataset with real FFmpeg-encoded video."""

import dataclasses

import click
from rich.console import Console
from rich.progress import Progress

from dl.testing.synthetic_spec import SyntheticConfig

_D = SyntheticConfig()


@click.command("synthetic-dataset")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--episodes", default=_D.episodes, show_default=True, help="Number of episodes.")
@click.option("--frames", default=f"{_D.frames_per_episode[0]}-{_D.frames_per_episode[1]}", show_default=True,
              help="Episode length in frames, MIN-MAX (lengths vary per episode) or one number.")
@click.option("--fps", default=_D.fps, show_default=True)
@click.option("--cameras", default=_D.cameras, show_default=True, help="Camera (video) keys.")
@click.option("--size", default=f"{_D.width}x{_D.height}", show_default=True, help="Frame WIDTHxHEIGHT.")
@click.option("--codec", type=click.Choice(["av1", "h264", "hevc", "mpeg4"]), default=_D.codec, show_default=True)
@click.option("--gop", default=_D.gop, show_default=True, help="Keyframe interval in frames.")
@click.option("--episodes-per-file", default=_D.episodes_per_file, show_default=True,
              help="Episodes per data parquet file and per mp4.")
@click.option("--row-group-size", type=int, default=None, help="Rows per parquet row group [one per file].")
@click.option("--seed", default=_D.seed, show_default=True)
def synthetic_dataset(path, episodes, frames, fps, cameras, size, codec, gop, episodes_per_file, row_group_size, seed):
    """Write a small synthetic LeRobot v3.0 dataset to PATH (the format dl run's default uses): real video
    encoded by FFmpeg, several episodes per file, each frame drawing its global index as a readable
    pattern so tests can check that the right frame was decoded."""
    low, _, high = frames.partition("-")
    width, _, height = size.partition("x")
    try:
        config = dataclasses.replace(
            _D, episodes=episodes, frames_per_episode=(int(low), int(high or low)), fps=fps, cameras=cameras,
            width=int(width), height=int(height), codec=codec, gop=gop, episodes_per_file=episodes_per_file,
            row_group_size=row_group_size, seed=seed)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    console = Console(stderr=True)  # a bar on a terminal, nothing (not even an empty line) in a pipe or a file
    from dl.testing.synthetic import write_synthetic_dataset

    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("encoding episodes", total=episodes)
        root = write_synthetic_dataset(path, config, progress=lambda done, total: bar.update(task, completed=done))
    click.echo(f"wrote {episodes} episodes to {root}")
