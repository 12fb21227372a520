"""`dl transcode`: a new LeRobot v3.0 dataset with the videos re-encoded (codec, GOP, quality), verified."""

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from dl.transcode.options import CODECS, DEFAULT_CRF, DEFAULT_PRESET, PIX_FMTS

from .console import make_console
from .options import parse_key_values, plugin_options


def source_of(src: str, source: str | None) -> tuple[str, str]:
    """(root, source plugin) for SRC: `hf://datasets/...` reads through `hub`, another URL (`s3://`, `gs://`,
    `hf://buckets/`...) through `bucket`, `file://` and plain paths through `local`; `source` overrides."""
    if src.startswith("file://"):
        return src.removeprefix("file://"), source or "local"
    if src.startswith("hf://datasets/"):
        return src, source or "hub"
    if "://" in src:
        return src, source or "bucket"
    return src, source or "local"


@click.command(epilog="\b\nExamples:\n"
               "  dl transcode ~/data/ds ~/data/ds-h264 --codec h264            # GOP 2, CRF 18: NVDEC on any GPU\n"
               "  dl transcode hf://datasets/OWNER/NAME ./NAME-hevc --codec hevc --gop 12 --crf 24\n"
               "  dl transcode s3://bucket/ds ./ds-av1 --codec av1 --storage-option endpoint_url=URL")
@click.argument("src")
@click.argument("dst", type=click.Path(file_okay=False))
@click.option("--codec", type=click.Choice(CODECS), required=True,
              help="h264 (libx264: every NVDEC decodes it), hevc (libx265: smaller files; NVDEC since Maxwell), "
                   "av1 (libsvtav1: smallest; no NVDEC on A100/H100-class GPUs).")
@click.option("--gop", type=click.IntRange(1), default=2, show_default=True,
              help="Frames per closed GOP (keyframe interval). 2 (LeRobot's): random frames decode fast; longer: "
                   "smaller files, for loaders that decode in order (pool).")
@click.option("--crf", type=click.IntRange(0), help="Quality: lower is better and larger. [" + ", ".join(
    f"{c} {v}" for c, v in DEFAULT_CRF.items()) + "]")
@click.option("--preset", help="Encoder speed preset (x264/x265: ultrafast ... veryslow; SVT-AV1: 0-13, higher is "
              "faster). [" + ", ".join(f"{c} {v}" for c, v in DEFAULT_PRESET.items()) + "]")
@click.option("--pix-fmt", type=click.Choice(PIX_FMTS), default="yuv420p", show_default=True,
              help="Output pixel format.")
@click.option("--bframes", type=click.IntRange(0, 16), default=0, show_default=True,
              help="B-frames (0: every frame decodes in presentation order).")
@click.option("--min-psnr", type=float, default=30.0, show_default=True, metavar="DB",
              help="Refuse to finish when a file's average PSNR (new frames against old) is below this.")
@click.option("--tolerance-s", type=click.FloatRange(0, min_open=True), default=1e-4, show_default=True,
              help="How far a new frame's time may lie from its data row's timestamp.")
@click.option("--jobs", type=click.IntRange(1), help="FFmpeg processes at once [the cores this process may use].")
@click.option("--allow-missing", is_flag=True, help="Transcode the videos that exist when some are missing in SRC, "
              "leaving those missing (episodes that need them stay unusable, as in SRC).")
@click.option("--source", help="Source plugin that reads SRC [local; hub for hf://datasets/...; bucket for other "
              "URLs].")
@click.option("--revision", help="Hub branch, tag or commit of an hf://datasets/ SRC [main].")
@click.option("--storage-option", multiple=True, metavar="KEY=VALUE", help="A filesystem option of a remote source, "
              "e.g. endpoint_url=http://127.0.0.1:9000 (repeatable).")
@click.option("--source-option", multiple=True, metavar="KEY=VALUE", help="An option of the source plugin.")
def transcode(src, dst, codec, gop, crf, preset, pix_fmt, bframes, min_psnr, tolerance_s, jobs, allow_missing,
              source, revision, storage_option, source_option):
    """Write a new LeRobot v3.0 dataset at DST from the one at SRC (a folder, hf://datasets/OWNER/NAME, or any
    fsspec URL), its videos re-encoded with FFmpeg: closed GOPs of --gop frames, no B-frames unless asked, one file
    per file as before (the same episodes per file), every other data and meta file copied, meta/episodes'
    from/to timestamps taken from the new files' frames and info.json's codec fields updated.

    Each file is verified as it finishes: as many frames as the original, every episode's frame times matching its
    data rows, and its PSNR against the original (the run refuses to finish below --min-psnr). Files are encoded
    in parallel FFmpeg processes. Interrupted (Ctrl-C, a failure), DST keeps the files already verified and has no
    meta/info.json, so nothing opens it as a dataset; the same command resumes. Finally the new dataset is read back
    through dl's reader and decoder, and meta/info.json is written last. meta/dl_transcode.json records how.
    """
    from dl.host.assembly import open_dataset
    from dl.transcode.options import TranscodeOptions
    from dl.transcode.run import Transcoder

    options = TranscodeOptions(codec, gop, crf, preset, pix_fmt, bframes, min_psnr, tolerance_s)
    root, source = source_of(src, source)
    given = plugin_options("source", source, source_option, "--source-option")
    if revision:
        given["revision"] = revision
    storage = parse_key_values(storage_option, "--storage-option")
    if storage:
        given["storage_options"] = storage
    console = Console(stderr=True)
    meta = open_dataset(root, source, given)
    console.print(f"transcoding {meta.source.url} -> {Path(dst).absolute()}: {options.describe()}", highlight=False,
                  soft_wrap=True, markup=False)
    from dl.bench.progress import rich_progress
    from dl.bench.signals import Terminated

    with rich_progress("transcode", console) as progress:
        transcoder = Transcoder(meta, Path(dst), options, jobs=jobs, allow_missing=allow_missing, progress=progress)
        try:
            record = transcoder.run()
        except (KeyboardInterrupt, Terminated):
            kept = len(transcoder.state.files) if transcoder.state else 0
            console.print(f"interrupted: {kept} video file(s) re-encoded and verified are kept in {dst}; run the "
                          "same command to continue.", highlight=False, soft_wrap=True, markup=False)
            raise
    _summary(record, dst, make_console())


def _summary(record: dict, dst: str, console: Console) -> None:
    files = record["files"].values()
    before, after = sum(f["original_size"] for f in files), sum(f["size"] for f in files)
    psnrs = [f["psnr_db"] for f in files if f["psnr_db"] is not None]
    table = Table(title=f"dl transcode -> {dst}", header_style="bold")
    table.add_column("")
    table.add_column("", justify="right")
    table.add_row("video files", str(len(files)))
    table.add_row("frames", str(sum(f["frames"] for f in files)))
    table.add_row("video MB before / after", f"{before / 1e6:.1f} / {after / 1e6:.1f}")
    table.add_row("PSNR dB, lowest file / mean", f"{min(psnrs):.2f} / {sum(psnrs) / len(psnrs):.2f}" if psnrs
                  else "lossless")
    table.add_row("keyframe interval (frames)", ", ".join(sorted({str(f['gop']) for f in files})))
    table.add_row("seconds", str(record["seconds"]))
    if record["missing_in_source"]:
        table.add_row("missing in the source (left missing)", str(len(record["missing_in_source"])))
    console.print(table)
    console.print(f"done: {dst} (how it was made: {dst}/meta/dl_transcode.json). Try it: dl run --root {dst}",
                  highlight=False, soft_wrap=True, markup=False)
