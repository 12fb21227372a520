"""`dl diagnose`: the decode path of one frame per camera, step by step, to say where and why it breaks.

Steps: resolve the dataset through its source (metadata), find each camera's video file of one episode, read
its first bytes through the source (a container or not), create the decoder, probe the stream, decode the
episode's first frame and check its timestamp. Alongside: the library versions (torch, torchcodec, FFmpeg's
libraries) and the stream's codec and GOP as found in the file against what info.json claims. The verdict
names the first step that failed and the fix."""

import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version

import numpy as np

from ..contracts.decoder import codec_matches
from ..contracts.errors import CodecUnsupportedError, DlError, format_indices
from ..host.assembly import build_decoder, open_dataset
from ..kits.video.torchcodec_video import open_video

CONTAINERS = {b"ftyp": "MP4/MOV (ISO BMFF)", b"\x1a\x45\xdf\xa3": "Matroska/WebM"}


@dataclass
class Step:
    """One step of the decode path: what was tried, whether it worked, what was found, and the fix."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


@dataclass
class Diagnosis:
    """The result of `diagnose`: library `versions`, `steps` in order (stopping at the first failure of a
    camera), per-camera `streams` facts, the `verdict` (a sentence with the fix when something failed), and
    `advice`: what else was found that does not break the decode path (a GPU here whose NVDEC cannot decode the
    dataset's codec, with the `dl transcode` command that fixes it), and `not_checked`: what the walk left out (the
    other episodes, those of them whose files are missing) and the command that checks it."""

    versions: dict
    steps: list[Step] = field(default_factory=list)
    streams: dict = field(default_factory=dict)
    verdict: str = ""
    advice: list[str] = field(default_factory=list)
    not_checked: str = ""

    @property
    def ok(self) -> bool:
        """Every step worked."""
        return all(s.ok for s in self.steps)

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {**asdict(self), "ok": self.ok}


def library_versions() -> dict:
    """torch, torchcodec, dl and the FFmpeg libraries torchcodec loaded (`{"libavcodec": "59.37.100", ...}`)."""
    out = {}
    for package in ("torch", "torchcodec", "dl"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    try:
        from torchcodec._core import get_ffmpeg_library_versions

        ffmpeg = get_ffmpeg_library_versions()
        out["ffmpeg"] = ffmpeg.get("ffmpeg_version")
        out.update({k: ".".join(map(str, v)) for k, v in ffmpeg.items() if k.startswith("lib")})
    except Exception as exc:  # torchcodec's own load error is the finding
        out["ffmpeg"] = f"torchcodec could not load FFmpeg: {exc}"
    return out


def container_of(head: bytes) -> str | None:
    """The container the first bytes of a file announce (MP4's `ftyp` box at byte 4, Matroska's EBML magic),
    or None."""
    if head[4:8] == b"ftyp":
        return CONTAINERS[b"ftyp"]
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return CONTAINERS[b"\x1a\x45\xdf\xa3"]
    return None


def not_a_container(head: bytes) -> str:
    """Why bytes that start no known container are probably there, and what to do."""
    if not head:
        return "the file is empty (an interrupted download?): download it again"
    if head.startswith(b"version https://git-lfs"):
        return "it is a Git LFS pointer, not the video: fetch the real file (git lfs pull, or huggingface_hub download)"
    if head.lstrip().startswith(b"<"):
        return "it is an HTML/XML page (an error page saved as the video?): download the file again"
    return "it is not an MP4 or Matroska file: download it again, or re-encode it to MP4"


def gop_of(source, path: str) -> tuple[int | None, str]:
    """The stream's keyframe interval in frames (the median gap between keyframes, from torchcodec's exact
    index, one scan of the file, through its private `VideoDecoder._get_key_frame_indices`), and, when it is
    None, why: a single keyframe, an index that cannot be read, or a torchcodec without that method."""
    import torchcodec

    try:
        decoder = open_video(source, path, seek_mode="exact")
        key_frames = getattr(decoder, "_get_key_frame_indices", None)
        if key_frames is None:
            return None, f"torchcodec {torchcodec.__version__} has no VideoDecoder._get_key_frame_indices to read it"
        keys = key_frames()
        keys = np.asarray(keys.tolist() if hasattr(keys, "tolist") else keys)
    except Exception as exc:  # a diagnostic: an unreadable index is reported, not raised
        return None, f"the keyframe index could not be read ({type(exc).__name__}: {exc})"
    return (int(np.median(np.diff(keys))), "") if len(keys) > 1 else (None, "one keyframe")


def diagnose(root: str, source: str = "local", source_options: dict | None = None, decoder: str = "cpu",
             decoder_options: dict | None = None, episode: int | None = None, tolerance_s: float = 1e-4,
             verbose: bool = False) -> Diagnosis:
    """Walk the decode path of `episode` (default: the first episode whose files all exist) of the dataset at
    `root`, one frame per camera; `verbose`: the container step shows the file's first bytes even when they are a
    container's (the facts always hold them). Never raises for what it diagnoses: failures become steps with a
    fix."""
    found = Diagnosis(library_versions())

    def step(name: str, ok: bool, detail: str, fix: str = "") -> bool:
        found.steps.append(Step(name, ok, detail, fix))
        return ok

    try:
        meta = open_dataset(root, source, source_options)
    except DlError as exc:
        step("dataset", False, str(exc), "point --root (or --repo-id) at a LeRobot v3.0 dataset root")
        return _verdict(found)
    incomplete = sorted({e for eps in meta.missing_files(list(meta.episodes.values())).values() for e in eps})
    missing = f" ({len(incomplete)} of them with missing files)" if incomplete else ""
    step("dataset", True, f"{meta.source.url}: {len(meta.episodes)} episodes{missing}, cameras "
         f"{', '.join(meta.video_keys)}")
    if not meta.video_keys:
        step("cameras", False, "info.json declares no video features", "nothing to decode in this dataset")
        return _verdict(found)
    complete = [e for e in meta.episodes.values() if not meta.missing_files([e])]
    chosen = meta.episodes.get(episode) if episode is not None else (complete[0] if complete else None)
    if chosen is None:
        step("episode", False, f"episode {episode} is not in the dataset" if episode is not None else
             "no episode has all its files", "choose an episode with --episode")
        return _verdict(found)
    try:
        dec = build_decoder(decoder, decoder_options)
    except DlError as exc:
        step("decoder", False, str(exc), "use --decoder cpu")
        return _verdict(found)
    step("decoder", True, f"{decoder} created")
    found.not_checked = _not_checked(meta, chosen.index, incomplete, root)
    for key, span in chosen.videos.items():
        found.streams[key] = _camera(meta, dec, chosen, key, span, tolerance_s, step, verbose)
    if decoder != GPU_DECODER:
        found.advice += gpu_advice(meta, chosen, decoder)
    return _verdict(found)


GPU_DECODER = "nvdec"


def gpu_advice(meta, episode, decoder: str) -> list[str]:
    """Where a GPU decoder runs here (`nvdec` builds: a GPU, CUDA builds of torch and torchcodec) but cannot decode
    a camera's codec (`CodecUnsupportedError`), one line per codec saying so, that `decoder` (and `dl run --decoder
    auto`) decodes on the CPU, and the `dl transcode` command that would let the GPU decode it; else nothing."""
    try:
        gpu = build_decoder(GPU_DECODER)
    except DlError:  # no GPU here (or no nvdec plugin): nothing to advise
        return []
    lines = {}
    for span in episode.videos.values():
        try:
            gpu.probe(meta.source, span.path)
        except CodecUnsupportedError as exc:
            lines.setdefault(exc.codec, f"{GPU_DECODER} cannot decode this dataset's {exc.codec} on this GPU "
                                        f"({exc.device}): {decoder} decodes it on the CPU (so does dl run --decoder "
                                        f"auto). To decode on the GPU, re-encode it: {exc.fix}")
        except DlError:
            continue
    return list(lines.values())


def _not_checked(meta, episode: int, incomplete: list[int], root: str) -> str:
    """What a walk of `episode` leaves out: the other episodes, those with missing files, and `dl validate`."""
    others = len(meta.episodes) - 1
    if not others:
        return f"every frame but episode {episode}'s first per camera: `dl validate {root}` decodes them all"
    missing = (f", of which {len(incomplete)} with missing files (episodes {format_indices(incomplete)})"
               if incomplete else "")
    return (f"{others} other episode(s){missing}, and every frame but the first: `dl validate {root}` checks every "
            "file and frame")


def _camera(meta, dec, episode, key: str, span, tolerance_s: float, step, verbose: bool) -> dict:
    facts: dict = {"path": span.path, "episode": episode.index, "codec_info_json": meta.info_codec(key)}
    where = f"{key} ({span.path})"
    if span.path not in meta.files:
        step(f"{key}: file", False, f"{where} is missing from {meta.source.url}",
             "download it, or leave the episode out")
        return facts
    facts["size_bytes"] = meta.files[span.path]
    head = meta.source.read_bytes(span.path, 0, 64)
    facts["first_bytes"] = head[:32].hex(" ")
    container = container_of(head)
    shown = f"; first bytes {head[:32]!r}" if verbose or container is None else ""
    if not step(f"{key}: container", container is not None, f"{where}: {container or 'not a video container'}{shown}",
                "" if container else not_a_container(head)):
        return facts
    try:
        probe = dec.probe(meta.source, span.path)
    except CodecUnsupportedError as exc:
        step(f"{key}: open", False, f"{exc.device} cannot decode {exc.codec} ({where})",
             f"decode on the CPU (--decoder cpu; dl run --decoder auto does), or re-encode the dataset: {exc.fix}")
        return facts
    except DlError as exc:
        step(f"{key}: open", False, str(exc),
             "check that the FFmpeg libraries above decode this codec, or re-encode the video to H.264")
        return facts
    facts.update(probe)
    gop, gop_unknown = gop_of(meta.source, span.path)
    facts["gop_frames"] = gop
    info = meta.video_info(key)
    claimed = facts["codec_info_json"]
    facts["info_json"] = {"codec": claimed, "width": info.get("video.width"), "height": info.get("video.height"),
                          "fps": info.get("video.fps"), "gop": info.get("video.g")}
    notes = []
    if claimed and not codec_matches(claimed, probe["codec"]):
        notes.append(f"info.json says codec {claimed!r}: the stream is decoded as {probe['codec']}")
    if info.get("video.width") and (info.get("video.width"), info.get("video.height")) != (probe["width"],
                                                                                          probe["height"]):
        notes.append(f"info.json says {info.get('video.width')}x{info.get('video.height')}")
    gop_note = (f"GOP unknown ({gop_unknown})" if gop is None else
                f"GOP {gop} (info.json records {info['video.g']})" if info.get("video.g") else
                f"GOP {gop} (info.json records none; pool decode_chunk_frames: a multiple of {gop})")
    step(f"{key}: stream", True, f"in the file: {probe['codec']} {probe['width']}x{probe['height']}, "
         f"{probe['num_frames']} frames at {probe['average_fps']:.3f} fps, {gop_note}, seek mode "
         f"{probe.get('seek_mode', '?')}" + "".join(f"; {n}" for n in notes))
    t0 = time.perf_counter()
    try:
        frames = dec.frames_at(meta.source, span.path, [span.from_timestamp])
    except DlError as exc:
        step(f"{key}: decode", False, str(exc), "re-encode the video (H.264, or AV1 with GOP 2 as LeRobot does)")
        return facts
    facts["decode_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
    gap = abs(float(frames.pts_s[0]) - span.from_timestamp)
    step(f"{key}: frame", gap < tolerance_s, f"first frame of episode {episode.index}: {tuple(frames.data.shape)} "
         f"{frames.data.dtype} on {frames.data.device} in {facts['decode_ms']} ms, pts {float(frames.pts_s[0]):.6f} s "
         f"for {span.from_timestamp:.6f} s", "" if gap < tolerance_s else
         "the video's timestamps do not match meta/episodes' from_timestamp: re-encode or re-export the episode")
    return facts


def _verdict(found: Diagnosis) -> Diagnosis:
    failed = next((s for s in found.steps if not s.ok), None)
    found.verdict = ("the decode path works: one frame per camera decoded and on time" if failed is None else
                     f"{failed.name} failed: {failed.detail.rstrip('.')}. Fix: {failed.fix}.")
    return found
