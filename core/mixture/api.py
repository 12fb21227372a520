"""`dl.make_mixture`: a mixture from loaders, or from a spec per member (root, source, loader, decoder, options)."""

import posixpath
from collections.abc import Mapping, Sequence

from ..contracts.errors import DlError
from ..format.tabular import tabular_keys
from ..host.api import make_dataset
from .dataset import MixtureDataset

SPEC_KEYS = ("root", "source", "loader", "decoder", "source_options", "loader_options", "decoder_options", "episodes",
             "rename", "name", "weight")
"""What a member spec (a dict) may hold; `root` is required, the rest as `dl.make_dataset` takes them, plus the
member's `rename`, `name` and `weight`."""


def make_mixture(members: Sequence, weights: str | Sequence[float] = "frames", *, names: Sequence[str] | None = None,
                 rename: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
                 features: Sequence[str] | None = None, samples_per_epoch: int | None = None, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None, resize: tuple[int, int] | None = None,
                 **config) -> MixtureDataset:
    """Several datasets as one training stream, each sample drawn from a member by weight (`dl.mixture`).

        mixture = dl.make_mixture([dl.make_dataset(a, loader="pool"), dl.make_dataset(b, loader="pool")],
                                  weights=[0.7, 0.3], rename={"observation.images.top": "observation.images.cam0"})
        loader = dl.make_dataloader(mixture, batch_size=32, num_workers=4)   # a dl.ResumableDataLoader

    Args:
        members: each a loader (from `dl.make_dataset`: `map`, `pool`, or any `dl.contracts.loader.ServesConsumers`)
            or a spec, a dict with `root` and any of `SPEC_KEYS` (built with `dl.make_dataset` and `config`).
        weights: "frames" (each frame equally likely; default), "episodes" (each member in proportion to its
            episodes), or one positive number per member (normalised to sum to 1). Specs may give a `weight` each.
        names: one per member, in messages, figures and `mixture.stats` (default: the last part of each dataset's
            root, made unique).
        rename: `{member key: mixture key}` for every member (where it has the key), or one mapping per member; a
            spec's `rename` is its own. A key's `{key}_is_pad` follows it.
        features: the keys to serve (after renaming; each must be in every member), default: those every member has.
            The LeRobot bookkeeping keys and `dataset_index` always come along.
        samples_per_epoch: samples of a mixture epoch (default: enough to read every member whole at least once; with
            weights by frames, the members' frames together).
        seed: seeds which member each sample comes from, and the order of every spec member (a loader you built
            keeps the seed you gave it).
        rank, world_size: this process's place (default: `dl.resolve_ranks`); members' own are not used.
        resize: (height, width) every spec member's decoder scales camera frames to (decoder option `resize`),
            for members whose cameras differ in size.
        **config: `dl.LoaderConfig` fields for spec members: `delta_timestamps` (keys as the mixture names them,
            offsets in seconds: each member's window spans the same time at its own fps), `image_dtype`,
            `tolerance_s`.

    Returns:
        A `dl.mixture.dataset.MixtureDataset` (a torch IterableDataset; `dl.make_dataloader` reads it).

    Raises:
        DlError: a bad spec, weights, rename or features, members that cannot be mixed (the message names the
            member and the key), or any error building a spec member (prefixed with its name).
    """
    if isinstance(members, Mapping) or not len(members):
        raise DlError("make_mixture takes a list of members (loaders or specs), at least one.")
    specs = [m if isinstance(m, Mapping) else None for m in members]
    names = _names(members, specs, names)
    renames, shared = _renames(rename, specs, len(members))
    weights = _weights(weights, specs)
    loaders = [m if spec is None else _build(spec, name, own, resize, {**config, "seed": seed})
               for m, spec, name, own in zip(members, specs, names, renames, strict=True)]
    renames = [_present(own, loader) if common else own
               for own, common, loader in zip(renames, shared, loaders, strict=True)]
    return MixtureDataset(loaders, names, renames, weights, None if features is None else list(features),
                          samples_per_epoch, seed, rank, world_size)


def _names(members, specs, given) -> list[str]:
    if given is not None:
        names = [str(n) for n in given]
        if len(names) != len(members) or len(set(names)) != len(names):
            raise DlError(f"mixture names {names}: give one distinct name per member ({len(members)}).")
        return names
    roots = [str(spec["root"]) if spec is not None and "root" in spec else member.meta.source.url
             for member, spec in zip(members, specs, strict=True)]
    names = default_names(roots)
    return [str(spec["name"]) if spec is not None and spec.get("name") else name for spec, name in zip(specs, names,
                                                                                                      strict=True)]


def default_names(roots: Sequence[str]) -> list[str]:
    """Members' names from their roots: the last part (`/data/open50` -> `open50`, `hf://datasets/lerobot/pusht@abc`
    -> `pusht`), `name[i]` where several share one."""
    names = [posixpath.basename(str(r).split("://")[-1].split("@")[0].rstrip("/")) or "member" for r in roots]
    return [f"{name}[{i}]" if names.count(name) > 1 else name for i, name in enumerate(names)]


def _renames(rename, specs, count: int) -> tuple[list[dict[str, str]], list[bool]]:
    """Each member's mapping, and whether it is the one given for every member (kept to the keys a member has)."""
    if rename is None or isinstance(rename, Mapping):
        base, shared = [dict(rename or {})] * count, [True] * count
    else:
        base, shared = [dict(r or {}) for r in rename], [False] * count
        if len(base) != count:
            raise DlError(f"mixture rename: give one mapping for every member, or one per member ({count}); got "
                          f"{len(base)}.")
    for i, spec in enumerate(specs):
        if spec is not None and spec.get("rename") is not None:
            base[i], shared[i] = dict(spec["rename"]), False
    return base, shared


def _weights(weights, specs):
    given = [None if spec is None else spec.get("weight") for spec in specs]
    if all(w is None for w in given):
        return weights if isinstance(weights, str) else list(weights)
    if not isinstance(weights, str) or weights != "frames":
        raise DlError("mixture weights given twice: in the member specs and as weights=; give them once.")
    if any(w is None for w in given):
        raise DlError("some mixture members give a weight and others do not: give every member one.")
    return given


def _build(spec: Mapping, name: str, rename: dict[str, str], resize, config: dict):
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown or "root" not in spec:
        raise DlError(f"mixture member {name}: a spec takes root (required) and {', '.join(SPEC_KEYS[1:])}; got "
                      f"{', '.join(sorted(spec))}.")
    own = {k: spec[k] for k in ("source", "loader", "decoder") if spec.get(k)}
    decoder_options = dict(spec.get("decoder_options") or {})
    if resize is not None:
        decoder_options.setdefault("resize", list(resize))
    member_config = {**config, "episodes": spec.get("episodes"), "rank": 0, "world_size": 1}
    if config.get("delta_timestamps"):
        own_name = {target: key for key, target in rename.items()}
        member_config["delta_timestamps"] = {own_name.get(k, k): v for k, v in config["delta_timestamps"].items()}
    try:
        return make_dataset(str(spec["root"]), **own, source_options=spec.get("source_options"),
                            loader_options=spec.get("loader_options"), decoder_options=decoder_options,
                            **member_config)
    except DlError as exc:
        exc.args = (f"mixture member {name}: {exc}",)
        raise


def _present(rename: dict[str, str], loader) -> dict[str, str]:
    """The mapping given for every member, kept to the keys this member has (a member's own mapping is kept whole,
    so a key it lacks is an error)."""
    keys = {*tabular_keys(loader.meta), *loader.meta.camera_keys}
    return {k: v for k, v in rename.items() if k in keys}
