"""`dl run --mix`: benchmark runs over a mixture of datasets (`dl.mixture`).

The host checks every member once (its metadata, its files, and that the members can be mixed) and writes each
member's metadata snapshot; the run builds each member through the one assembly path (decoder wrapped in the decode
timer) and mixes them. What the runner reads of a single dataset's pipeline (decode seconds, the decoder caches, a
remote source's figures) is summed over the members (`MixtureAssembly`). The decode ceiling is a figure of one
dataset, so a mixture run skips it (run a member alone for it).
"""

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from ..contracts.config import LoaderConfig
from ..contracts.errors import DlError
from ..contracts.loader import ReportsStats
from ..format.episodes import episode_lengths
from ..format.metadata import DatasetMeta
from ..format.tabular import tabular_keys
from ..host.assembly import Assembly, build_loader, open_dataset
from ..mixture.api import default_names, make_mixture
from ..mixture.schema import member_features, served_features
from .modes import mode_delta_timestamps
from .results import merge_stats
from .session import check_dataset, resolve_decoder, write_snapshot
from .spec import RunSpec
from .timed_decoder import TimedDecoder


def parse_member(text: str, source: str | None = None) -> dict:
    """`ROOT_OR_URL[:WEIGHT]` as a `RunSpec.mix` member: its root, weight (None: the mixture's weighting) and source
    (`source` when given, else `hub` for `hf://` URLs, `bucket` for other URLs, `local` for paths).

    Raises:
        DlError: an empty root or a weight that is not a positive number.
    """
    root, weight = text, None
    head, sep, tail = text.rpartition(":")
    if sep and head and not tail.startswith("//"):
        try:
            weight = float(tail)
        except ValueError:
            weight = None
        else:
            root = head
            if not weight > 0:
                raise DlError(f"--mix {text}: the weight after the last ':' must be a positive number.")
    if not root:
        raise DlError(f"--mix {text!r}: give a dataset root or URL, optionally followed by :WEIGHT.")
    inferred = "hub" if root.startswith("hf://") else "bucket" if "://" in root else "local"
    return {"root": root, "weight": weight, "source": source or inferred, "source_options": {}}


def prepare_mixture(base: RunSpec, specs_dir: Path) -> RunSpec:
    """The host's side: check each member's dataset (`dl.bench.session.check_dataset`; the source options of the
    command line go to the members that are not local), write its metadata snapshot
    under `specs_dir/member<i>/`, check that the members can be mixed (renames, features, shapes), resolve
    `--decoder auto` on the first member, and turn the decode ceiling off (a per-dataset figure).

    Raises:
        DlError: a member that cannot be read or mixed (the message names it), weights given to some members only.
    """
    if base.episodes is not None:
        raise DlError("--episodes selects one dataset's episodes; with --mix every member is read whole.")
    weights = [m["weight"] for m in base.mix]
    if any(w is None for w in weights) and any(w is not None for w in weights):
        raise DlError("give every --mix member a :WEIGHT, or none (then --mix-weights says how to weigh them).")
    members, metas = [], []
    for i, member in enumerate(base.mix):
        given = base.source_options if member["source"] != "local" else {}  # --storage-option etc.: remote members
        one = dataclasses.replace(base, root=member["root"], source=member["source"], mix=[],
                                  source_options={**given, **member["source_options"]})
        try:
            meta = check_dataset(one)
        except DlError as exc:
            exc.args = (f"--mix {member['root']}: {exc}",)
            raise
        one = write_snapshot(one, meta, specs_dir / f"member{i}")
        members.append({**member, "source_options": one.source_options, "metadata_snapshot": one.metadata_snapshot})
        metas.append(meta)
    _check_mixable(base, metas)
    base = resolve_decoder(base, metas[0])
    return dataclasses.replace(base, mix=members, ceiling_s=0.0)


def _check_mixable(base: RunSpec, metas: list[DatasetMeta]) -> None:
    rename = base.mix_options.get("rename", {})
    resize = base.decoder_options.get("resize")
    per_member = []
    for meta in metas:
        own = _own_rename(rename, meta)
        per_member.append(member_features(meta, _member_delta(base, meta, own), resize, own,
                                          bool(base.decoder_options.get("resize_depth"))))
    served_features(per_member, default_names([m.source.url for m in metas]), base.mix_options.get("features"))


def _own_rename(rename: dict[str, str], meta: DatasetMeta) -> dict[str, str]:
    """The --mix-rename pairs that name a key of this member."""
    keys = {*tabular_keys(meta), *meta.camera_keys}
    return {k: v for k, v in rename.items() if k in keys}


def _member_delta(spec: RunSpec, meta: DatasetMeta, own: dict[str, str]) -> dict:
    """The member's windows in its own key names: its mode's, then --delta-timestamps (mixture names) translated."""
    back = {target: key for key, target in own.items()}
    return {**mode_delta_timestamps(spec.mode, meta), **{back.get(k, k): v for k, v in spec.delta_timestamps.items()}}


def build_mixture(spec: RunSpec) -> tuple["MixtureAssembly", dict, float]:
    """The run's side: each member through `dl.host.assembly.build_loader` from its snapshot (decoder wrapped in the
    decode timer), mixed with `dl.make_mixture`; each member's windows by name; and the seconds the members'
    metadata took."""
    built, deltas, metas = [], [], []
    metadata_s = 0.0
    rename = spec.mix_options.get("rename", {})
    for member in spec.mix:
        snapshot = json.loads(Path(member["metadata_snapshot"]).read_text()) if member.get("metadata_snapshot") \
            else None
        t0 = time.perf_counter()
        meta = open_dataset(member["root"], member["source"], member["source_options"], snapshot=snapshot)
        metadata_s += time.perf_counter() - t0
        delta = _member_delta(spec, meta, _own_rename(rename, meta))
        config = LoaderConfig(delta_timestamps=delta or None, image_dtype=spec.image_dtype,
                              tolerance_s=spec.tolerance_s, seed=spec.seed, rank=0, world_size=1)
        built.append(build_loader(meta, spec.loader, spec.decoder, config=config, loader_options=spec.loader_options,
                                  decoder_options=spec.decoder_options, wrap_decoder=TimedDecoder))
        deltas.append(delta)
        metas.append(meta)
    given = [m["weight"] for m in spec.mix]
    weights = given if all(w is not None for w in given) else spec.mix_options.get("weights", "frames")
    names = default_names([m.source.url for m in metas])
    mixture = make_mixture([b.loader for b in built], weights, names=names, rename=rename,
                           features=spec.mix_options.get("features"),
                           samples_per_epoch=spec.mix_options.get("samples_per_epoch"), seed=spec.seed)
    return MixtureAssembly(built, mixture), dict(zip(names, deltas, strict=True)), metadata_s


class MixtureAssembly:
    """The members' assemblies as the runner reads one `dl.host.assembly.Assembly`: `loader` is the mixture,
    `decoder` and `source` sum their members' figures, `meta` is the first member's."""

    def __init__(self, members: list[Assembly], mixture):
        self.members, self.loader = members, mixture
        self.meta = members[0].meta
        self.decoder = TimedDecoders([m.decoder for m in members])
        counted = [m.source for m in members if isinstance(m.source, ReportsStats)]
        self.source = MemberSources(counted) if counted else members[0].source
        self.decoder_cache: dict = {}

    def episode_weights(self) -> np.ndarray:
        """Each episode's chance of a sample, float64 [episodes of every member]: its share of its member's frames x
        the member's weight."""
        return np.concatenate([weight * episode_lengths(m.loader.episodes) / frames for m, weight, frames in
                               zip(self.members, self.loader.weights, self.loader.frames, strict=True)])

    def summary(self, deltas: dict) -> dict:
        """The result's `dataset`: the mixture's cameras and, per member, what a single dataset's summary holds."""
        members = [{"name": name, "root": m.source.url, "episodes": len(m.loader.episodes),
                    "frames": int(episode_lengths(m.loader.episodes).sum()), "fps": m.meta.fps,
                    "cameras": m.meta.camera_keys, "delta_timestamps": deltas[name], "weight": round(weight, 6)}
                   for name, m, weight in zip(self.loader.names, self.members, self.loader.weights, strict=True)]
        return {"root": " + ".join(m["root"] for m in members), "episodes": sum(m["episodes"] for m in members),
                "frames": sum(m["frames"] for m in members), "cameras": self.loader.video_keys, "members": members}


class TimedDecoders:
    """The members' `TimedDecoder`s as one: `decode_s` summed (setting it to 0 zeroes each), `cache` their caches."""

    def __init__(self, decoders: list[TimedDecoder]):
        self.decoders, self.inner = decoders, decoders[0].inner
        self.name = "+".join(dict.fromkeys(d.name for d in decoders))
        self.cache = _Caches([d.cache for d in decoders])

    @property
    def decode_s(self) -> float:
        return sum(d.decode_s for d in self.decoders)

    @decode_s.setter
    def decode_s(self, value: float) -> None:
        if value != 0:
            raise ValueError("the members' decode seconds can only be zeroed together")
        for decoder in self.decoders:
            decoder.decode_s = 0.0


class _Caches:
    """The members' decoder caches: cleared and reset together, their counters summed."""

    def __init__(self, caches: list):
        self.caches = caches

    def clear(self) -> None:
        for cache in self.caches:
            cache.clear()

    def reset_stats(self) -> None:
        for cache in self.caches:
            cache.reset_stats()

    def stats(self) -> dict:
        every = [c.stats() for c in self.caches]
        return {k: sum(s[k] or 0 for s in every) for k in every[0]}


class MemberSources:
    """The members' sources that count figures (`dl.contracts.loader.ReportsStats`, remote sources), as one: reset
    together, figures combined by the sources' own rules (`dl.bench.results.merge_stats`)."""

    def __init__(self, sources: list):
        self.sources, self.stats_merge = sources, sources[0].stats_merge
        self.url = " + ".join(s.url for s in sources)

    def reset_stats(self) -> None:
        for source in self.sources:
            source.reset_stats()

    def figures(self, num_workers: int = 0, batch_size: int = 1) -> dict:
        return merge_stats([s.figures(num_workers, batch_size) for s in self.sources], self.stats_merge)
