"""Checks of the video streams against info.json and meta/episodes, from each file's `Decoder.probe` facts.

Warned, once, where info.json disagrees with a stream but the decoded values stay right (LeRobot serves them
too): another codec (the stream is what gets decoded), another frame rate (frames are picked by time and each is
checked against `tolerance_s`), a feature `video.fps` other than info.json's `fps`, a frame size other than
info.json's shape when the files agree with each other. Refused: an episode whose span lies past its file's end
(its frames would be another moment's, or none), and a file whose frame size differs from the camera's other files
(a batch cannot hold both; LeRobot fails when it stacks them).
"""

import numpy as np

from ..contracts.decoder import Decoder, codec_matches
from ..contracts.errors import DatasetFormatError, warn
from .episodes import episodes_in_file
from .features import video_info

FPS_SLACK = 0.01
"""Relative difference between two frame rates below which they are taken as equal (29.97 vs 30 is not)."""


def info_size(feature: dict) -> tuple[int, int] | None:
    """(height, width) of a camera from info.json's shape, read by its `names` when they say which axis is which
    (LeRobot writes [height, width, channels]; some writers [channels, height, width]); None if unreadable."""
    shape, names = list(feature.get("shape") or ()), list(feature.get("names") or ())
    if len(shape) != 3:
        return None
    if len(names) == 3 and "height" in names and "width" in names:
        return shape[names.index("height")], shape[names.index("width")]
    return (shape[1], shape[2]) if shape[0] in (1, 3, 4) and shape[2] not in (1, 3, 4) else (shape[0], shape[1])


def warn_claims(meta, key: str, path: str, facts: dict, size_too: bool = True) -> tuple[int, int]:
    """Warn where info.json's codec, frame rate or (with `size_too`) frame size for camera `key` disagree with
    `path`'s stream (each once); returns the stream's (height, width), the size every file of the camera must then
    have."""
    where = f"{meta.source.url}/{path}"
    claimed, stream = meta.info_codec(key), facts["codec"]
    if claimed and not codec_matches(claimed, stream):
        warn(f"{meta.source.url}/meta/info.json: says camera {key} is {claimed!r}, but {path} is {stream!r}; "
             f"dl decodes the stream as {stream}.")
    rate = float(facts["average_fps"] or 0)
    if rate and abs(rate / meta.fps - 1) > FPS_SLACK:
        warn(f"{where}: plays at {rate:.3f} fps, meta/info.json says fps {meta.fps}; frames are picked by timestamp "
             "and checked against tolerance_s, so a sample fails loudly if none fits.")
    feature_fps = video_info(meta.features[key]).get("video.fps")
    if isinstance(feature_fps, int | float) and abs(feature_fps / meta.fps - 1) > FPS_SLACK:
        warn(f"{meta.source.url}/meta/info.json: camera {key} has video.fps {feature_fps} but the dataset's fps is "
             f"{meta.fps}; dl uses fps {meta.fps} for timestamps and windows.")
    size = (int(facts["height"]), int(facts["width"]))
    if size_too:
        warn_size(meta, key, where, size)
    return size


def warn_size(meta, key: str, where: str, size: tuple[int, int]) -> None:
    """Warn when camera `key`'s frames (`size`, height x width, of the file `where`) are not info.json's shape."""
    claimed = info_size(meta.features[key])
    if claimed is not None and claimed != size:
        warn(f"{where}: frames are {size[1]}x{size[0]}, but meta/info.json's shape for camera {key} says "
             f"{claimed[1]}x{claimed[0]}; dl serves the stream's frames ({size[1]}x{size[0]}), as LeRobot does.")


def check_file(meta, key: str, path: str, facts: dict, episodes: list, size: tuple[int, int] | None) -> None:
    """Check `path` (camera `key`) against the selected `episodes` it holds: each span's last frame lies inside the
    stream, and the frame size is the camera's (`size`, from the first file probed; None: not checked).

    Raises:
        DatasetFormatError: naming the file, the episode and both sides.
    """
    where = f"{meta.source.url}/{path}"
    got = (int(facts["height"]), int(facts["width"]))
    if size is not None and got != size:
        raise DatasetFormatError(
            f"{where}: frames are {got[1]}x{got[0]}, but camera {key}'s other files are {size[1]}x{size[0]}: a batch "
            "cannot hold both. Re-encode the file at the camera's size, or leave its episodes out.")
    duration = float(facts["duration_s"] or 0)
    rate = float(facts["average_fps"] or 0) or meta.fps
    if not duration:
        return
    columns, positions = getattr(episodes, "columns", None), getattr(episodes, "positions", None)
    if columns is not None:  # a selection: the spans' ends as arrays, and only a span past the end as an EpisodeMeta
        last = columns.from_timestamp[key][positions] + (columns.length[positions] - 1) / rate
        past = np.flatnonzero(last >= duration + 0.5 / rate)
        episodes = [episodes[int(past[0])]] if len(past) else []
    for ep in episodes:
        span = ep.videos[key]
        last = span.from_timestamp + (ep.length - 1) / rate
        if last >= duration + 0.5 / rate:
            raise DatasetFormatError(
                f"{where}: lasts {duration:.3f} s, but episode {ep.index} needs frames up to {last:.3f} s "
                f"(from_timestamp {span.from_timestamp:.3f} s in meta/episodes + {ep.length} frames at {rate:g} fps): "
                "its span in meta/episodes lies past the file's end. Restore meta/episodes or the video, or leave "
                "the episode out.")


def check_streams(meta, decoder: Decoder, episode, episodes: list) -> dict[str, tuple[int, int]]:
    """Probe each camera's file of `episode` (in the process that opens the dataset), warn where info.json
    disagrees with it (`warn_claims`) and check it against the selected `episodes` it holds (`check_file`).

    Returns:
        `{camera key: (height, width)}` the camera's other files must match.

    Raises:
        DatasetFormatError: as `check_file`. VideoDecodeError: a video cannot be opened.
    """
    sizes = {}
    for key, span in episode.videos.items():
        facts = decoder.probe(meta.source, span.path)
        sizes[key] = warn_claims(meta, key, span.path, facts)
        check_file(meta, key, span.path, facts, episodes_in_file(episodes, key, span.path), None)
    return sizes
