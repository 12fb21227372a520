"""What a mixture's samples hold when its members' datasets name and shape things differently.

Each member's keys are renamed by its mapping (`{"observation.images.top": "observation.images.cam0"}`; a key's
`{key}_is_pad` follows it). The mixture serves the features every member has after renaming, or those the user lists
(each must be in every member); the bookkeeping keys (`BOOKKEEPING`) always come along, and every sample gets
`dataset_index`, the member it came from (LeRobot's `MultiLeRobotDataset` key). A served key must have one dtype and
shape in every member, windows included (`delta_timestamps` are seconds, so a window has as many offsets at any fps);
camera frames must have one size, which a decoder's `resize` gives (`dl.contracts.decoder.Decoder.resize`).
"""

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ..contracts.errors import DlError
from ..format.metadata import DEFAULT_KEYS, DatasetMeta
from ..format.tabular import tabular_keys

BOOKKEEPING = (*DEFAULT_KEYS, "task")
"""Keys every LeRobot sample carries with a fixed meaning: always served, never renamed."""
MEMBER_KEY = "dataset_index"
"""The sample key naming the member a sample came from: int64, its position in `mixture.names`."""


@dataclass(frozen=True)
class Feature:
    """A sample key of one member, as a batch sees it.

    Attributes:
        key: the member's own name for it.
        dtype: info.json's dtype ("video" for a camera, "depth" for a depth camera; "string" for `task`; "bool" for a
            pad mask).
        shape: per sample: info.json's shape, a camera's (channels, height, width), a window's offsets first.
    """

    key: str
    dtype: str
    shape: tuple


def member_features(meta: DatasetMeta, delta_timestamps: dict | None, resize: tuple[int, int] | None,
                    rename: dict[str, str], resize_depth: bool = False) -> dict[str, Feature]:
    """The keys of a member's samples by their names in the mixture, in sample order, from its metadata, its windows
    (`delta_timestamps`, in its own key names) and its decoder's `resize` (`dl.contracts.decoder.Decoder.resize`;
    depth cameras too with the cpu decoder's `resize_depth`).

    Raises:
        DlError: `rename` names a key the member does not have, a bookkeeping key, or two keys onto one name.
    """
    name_of = dict(rename)
    windows = {k: len(v) for k, v in (delta_timestamps or {}).items()}
    own: dict[str, Feature] = {}
    for key in tabular_keys(meta):
        feature = meta.features.get(key, {})
        shape = _windowed(tuple(feature.get("shape", [1])), key, windows)
        own[key] = Feature(key, feature.get("dtype", "int64"), shape)
    own["task"] = Feature("task", "string", ())
    if "subtask_index" in own and meta.subtasks:  # LeRobot 0.4's subtask string, as the member serves it
        own["subtask"] = Feature("subtask", "string", ())
    for key in meta.camera_keys:  # the decoder's resize applies to video (depth: if asked); image features keep size
        height, width, channels = meta.features[key]["shape"]
        scaled = resize and key in meta.video_keys and (key not in meta.depth or resize_depth)
        size = tuple(resize) if scaled else (height, width)
        kind = "depth" if key in meta.depth else "video"  # depth (float32 mm) and pictures never share a key
        own[key] = Feature(key, kind, _windowed((channels, *size), key, windows))
    unknown = sorted(set(name_of) - set(own))
    if unknown:
        raise DlError(f"rename {', '.join(map(repr, unknown))}: not a feature of {meta.source.url} (its features: "
                      f"{', '.join(k for k in own if k not in BOOKKEEPING)}).")
    fixed = sorted(set(name_of) & set(BOOKKEEPING))
    if fixed:
        raise DlError(f"rename {', '.join(map(repr, fixed))}: bookkeeping keys keep their LeRobot names.")
    out: dict[str, Feature] = {}
    for key, feature in own.items():
        target = name_of.get(key, key)
        if target in out:
            raise DlError(f"rename: {out[target].key!r} and {key!r} of {meta.source.url} would both be {target!r}.")
        out[target] = feature
        if key in windows:
            out[f"{target}_is_pad"] = Feature(f"{key}_is_pad", "bool", (windows[key],))
    return out


def _windowed(shape: tuple, key: str, windows: dict[str, int]) -> tuple:
    return (windows[key], *shape) if key in windows else shape


def with_language(per_member: list[dict[str, Feature]]) -> list[dict[str, Feature]]:
    """`per_member` with LeRobot 0.6's language columns given to every member when any member has them: a member
    without them serves an empty list of messages per frame (a `Feature` whose `key` is None), so a mixture of
    annotated and unannotated datasets keeps the annotations."""
    language = {k: f for features in per_member for k, f in features.items() if f.dtype == "language"}
    return [{**features, **{k: Feature(None, f.dtype, f.shape) for k, f in language.items() if k not in features}}
            for features in per_member]


def served_features(per_member: list[dict[str, Feature]], names: list[str], wanted: list[str] | None) -> list[str]:
    """The keys the mixture serves, in the first member's order: `wanted` (with their pads and the bookkeeping keys),
    else every key all members have; dropped keys are warned about, naming the members that have them.

    Raises:
        DlError: a wanted key a member lacks (naming the member, the key and what that member has), or a served key
            whose dtype or shape differs between members (cameras: their size; the fix is a decoder `resize`).
    """
    per_member = with_language(per_member)
    if wanted is not None:
        for name, features in zip(names, per_member, strict=True):
            missing = [k for k in wanted if k not in features]
            if missing:
                raise DlError(f"mixture member {name} has no {', '.join(map(repr, missing))} (after renaming); its "
                              f"features: {', '.join(k for k in features if k not in BOOKKEEPING)}. Rename its own "
                              "key to it, or leave the key out of features.")
        keep = {*wanted, *BOOKKEEPING, *(f"{k}_is_pad" for k in wanted)}
        served = [k for k in per_member[0] if k in keep and all(k in f for f in per_member)]
    else:
        served = [k for k in per_member[0] if all(k in f for f in per_member)]
        dropped = {name: [k for k in f if k not in served and not k.endswith("_is_pad")]
                   for name, f in zip(names, per_member, strict=True)}
        if any(dropped.values()):
            where = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in dropped.items() if keys)
            warnings.warn(f"mixture: keys not in every member are left out ({where}). Rename them to a common name, "
                          "or list the features to serve.", stacklevel=4)
    for key in served:
        _check_same(key, [f[key] for f in per_member], names)
    return served


def _check_same(key: str, features: list[Feature], names: list[str]) -> None:
    if all((f.dtype, f.shape) == (features[0].dtype, features[0].shape) for f in features):
        return
    described = ", ".join(f"{n}: {f.dtype} {list(f.shape)}" for n, f in zip(names, features, strict=True))
    if features[0].dtype == "video":
        sizes = {f.shape[-2:] for f in features}
        if len(sizes) > 1:
            raise DlError(f"mixture camera {key!r} has frames of different sizes ({described}; [window,] channels, "
                          "height, width): a batch needs one size. Pass resize=(height, width) to make_mixture (or "
                          "decoder_options={'resize': [height, width]} to each member's make_dataset): the decoder "
                          "scales frames as it decodes them (torchcodec's Resize).")
    raise DlError(f"mixture key {key!r} differs between members ({described}). Give every member the same "
                  "delta_timestamps (seconds), rename another key to it, or leave it out of features.")


class SampleSchema:
    """Turns a member's sample into the mixture's: served keys renamed, in one order, plus `dataset_index`.

    Args:
        per_member: each member's `member_features`.
        served: the served keys (`served_features`).
    """

    def __init__(self, per_member: list[dict[str, Feature]], served: list[str]):
        self.served = served
        per_member = with_language(per_member)
        self.pairs = [[(f[k].key, k) for k in served] for f in per_member]
        self.cameras = [k for k in served if per_member[0][k].dtype in ("video", "depth")]

    def convert(self, sample: dict, member: int) -> dict:
        """The mixture's sample from `sample`, a sample of member `member`."""
        out = {target: [] if own is None else sample[own] for own, target in self.pairs[member]}
        out[MEMBER_KEY] = torch.from_numpy(np.array(member, dtype=np.int64))
        return out
