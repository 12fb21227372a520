"""Errors dl raises on bad input, and the warnings it gives where LeRobot serves the data and the values stay right.
Each message names the file, episode or option at fault and what to do (or what dl does)."""

import warnings


class DlError(Exception):
    """Base class of every error dl raises on purpose; the CLI prints these without a traceback."""


class DlWarning(UserWarning):
    """What dl warns about: data LeRobot serves and dl serves too (the values stay right), or a choice dl made
    for the user. Shown as one line, `warning: <file>: <what>; <what dl does>` (`show_warnings_as_lines`),
    never with Python's source-file prefix."""


def warn(message: str) -> None:
    """Issue `message` as a `DlWarning` (Python's warning filters apply: by default once per message and place)."""
    warnings.warn(message, DlWarning, stacklevel=3)


def show_warnings_as_lines() -> None:
    """Make Python print every `DlWarning` as `warning: <message>` on one line (other warnings unchanged). dl's
    commands (`dl.cli.main`) and run processes call it; `import dl` does not; calling it again changes nothing."""
    previous = warnings.formatwarning
    if getattr(previous, "_dl_lines", False):
        return

    def formatwarning(message, category, filename, lineno, line=None):
        if issubclass(category, DlWarning):
            return "warning: " + " ".join(str(message).split("\n")) + "\n"
        return previous(message, category, filename, lineno, line)

    formatwarning._dl_lines = True
    warnings.formatwarning = formatwarning


class DatasetFormatError(DlError):
    """The dataset's metadata is not LeRobot v3.0 or is inconsistent (wrong version, missing keys)."""


class MissingFilesError(DlError):
    """Files the selected episodes need do not exist in the source.

    Attributes:
        missing: relative paths (from the dataset root) of every missing file, sorted.
        episodes: the episode indices that need at least one missing file, sorted.
        usable: the selected episodes whose files all exist, sorted.
        complete: when none selected is usable, the dataset's episodes whose files all exist (None: not looked up).
    """

    def __init__(self, root: str, missing: list[str], episodes: list[int], usable: list[int],
                 complete: list[int] | None = None):
        self.missing, self.episodes, self.usable, self.complete = missing, episodes, usable, complete
        shown = "\n  ".join(missing[:50]) + ("\n  ..." if len(missing) > 50 else "")
        if usable:
            select = f"--episodes {format_indices(usable)}"
        elif complete:
            select = ("none of the selected is complete; the complete episodes are --episodes "
                      f"{format_indices(complete)}")
        else:
            select = "no episode of the dataset is complete"
        super().__init__(
            f"{len(missing)} file(s) needed by episode(s) {format_indices(episodes)} are missing under "
            f"{root}:\n  {shown}\nDownload them, or select only the episodes whose files exist "
            f"(episodes=[...] / {select})."
        )


class SourceFileNotFoundError(DlError, FileNotFoundError):
    """A file the source was asked for does not exist; the message names its URL."""


class UnsafePathError(DlError):
    """A dataset-relative path is absolute or leaves the dataset root (`..`)."""


class TimestampToleranceError(DlError):
    """A decoded frame's timestamp is farther than `tolerance_s` from the queried timestamp."""


class VideoDecodeError(DlError):
    """A video file could not be opened or decoded."""


class CodecUnsupportedError(VideoDecodeError):
    """A decoder cannot decode a stream's codec on this machine (e.g. AV1 on a GPU whose NVDEC has no AV1 engine),
    although it runs here: the dataset, not the decoder, would have to change.

    Attributes:
        codec: the stream's codec (FFmpeg's name, e.g. "av1").
        device: what lacks it, in words (e.g. "NVIDIA H100 80GB HBM3").
        fix: the command that makes the dataset decodable here (`transcode_command`).
    """

    def __init__(self, message: str, codec: str, device: str, fix: str):
        super().__init__(message)
        self.codec, self.device, self.fix = codec, device, fix


def transcode_command(url: str, codec: str = "h264", gop: int = 2) -> str:
    """The `dl transcode` command that writes the dataset at `url` (a source's URL: `file:///path`, `hf://...`,
    `s3://...`) re-encoded to `codec` with GOPs of `gop` frames, beside it when it is local (`PATH-h264`), else
    in the current folder."""
    local = url.startswith("file://") or "://" not in url
    src = url.removeprefix("file://").rstrip("/")
    name = src.split("/")[-1].split("@")[0] or "dataset"
    dst = f"{src}-{codec}" if local else f"./{name}-{codec}"
    return f"dl transcode {src} {dst} --codec {codec} --gop {gop}"


class DecoderUnavailableError(DlError):
    """A decoder cannot run on this machine (no GPU, torch or torchcodec built without CUDA): not a mistake in its
    options. The decoder conformance suite skips on it; `dl run --decoder auto` passes the decoder over."""


class PluginError(DlError):
    """A plugin is unknown, failed to load, or clashes with another plugin's name."""


class PluginClashError(PluginError):
    """Two plugins register the same name in one kind; the message names both distributions."""


class ResumeError(DlError):
    """A loader state cannot be resumed with the current configuration."""


def format_indices(indices: list[int]) -> str:
    """Format sorted integers compactly as ranges: [0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    parts: list[str] = []
    for i in sorted(set(indices)):
        if parts and parts[-1][1] == i - 1:
            parts[-1][1] = i
        else:
            parts.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def describe(exc: BaseException) -> str:
    """The cause of `exc` as users should read it: dl's own message for a `DlError`, else "Type: message".
    An exception re-raised by a torch DataLoader from one of its workers carries the worker's whole traceback
    as its message; only the original exception's message is kept."""
    text = str(exc)
    if text.startswith("Caught ") and "Original Traceback" in text:
        for head in (f"{type(exc).__module__}.{type(exc).__qualname__}: ", f"{type(exc).__qualname__}: "):
            start = text.rfind("\n" + head)
            if start >= 0:
                text = text[start + 1 + len(head):].rstrip()
                break
        else:
            text = text.rstrip().splitlines()[-1]
    return text if isinstance(exc, DlError) else f"{type(exc).__name__}: {text}"
