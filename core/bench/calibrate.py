"""`dl run --decoder auto`: time every decoder that can run on this machine on the dataset at hand and pick the
fastest, in the host, before any run starts; the calibration goes into every run's spec and result."""

import dataclasses

from ..contracts.errors import DlError
from ..contracts.units import parse_bytes
from ..format.metadata import DatasetMeta
from ..host.registry import Registry
from .ceiling import random_frames_per_s, sequential_frames_per_s
from .spec import RunSpec

AUTO = "auto"


def calibrate_decoders(meta: DatasetMeta, episodes: list, registry: Registry, seconds: float,
                       sequential: bool) -> dict:
    """Build every registered decoder with its default options and measure it on `episodes` of `meta`: random
    single frames/s and sequential frames/s (`dl.bench.ceiling`), `seconds` each, in this process. A decoder
    whose factory raises `DlError` (no GPU...) is listed with its reason.

    Args:
        sequential: rank by sequential frames/s (a loader that decodes runs: `pool` with a decode budget)
            instead of random single frames/s (`map`).

    Returns:
        `{"chosen", "by", "seconds", "decoders": {name: {"random_frames_per_s", "sequential_frames_per_s"} or
        {"unavailable": reason}}}`.

    Raises:
        DlError: no decoder can run here, or the dataset has no cameras.
    """
    if not meta.video_keys:
        raise DlError(f"--decoder auto: {meta.source.url} has no cameras to time decoders on; give --decoder NAME.")
    by = "sequential_frames_per_s" if sequential else "random_frames_per_s"
    found: dict[str, dict] = {}
    for name in registry.names("decoder"):
        try:
            decoder = registry.create("decoder", name)
            found[name] = {"random_frames_per_s": round(random_frames_per_s(meta, decoder, episodes, seconds), 1),
                           "sequential_frames_per_s": round(sequential_frames_per_s(meta, decoder, episodes, seconds),
                                                            1)}
        except DlError as exc:
            found[name] = {"unavailable": str(exc)}
    timed = {name: r for name, r in found.items() if "unavailable" not in r}
    if not timed:
        reasons = "; ".join(f"{n}: {r['unavailable']}" for n, r in found.items())
        raise DlError(f"--decoder auto: no decoder can decode {meta.source.url} here ({reasons}).")
    chosen = max(timed, key=lambda n: timed[n][by])
    return {"chosen": chosen, "by": by, "seconds": seconds, "decoders": found}


def check_auto_options(base: RunSpec) -> None:
    """Raises DlError when decoder options come with decoder "auto" (they belong to one decoder)."""
    if base.decoder == AUTO and base.decoder_options:
        raise DlError("--decoder auto picks a decoder by timing each with its defaults; give --decoder NAME to set "
                      f"decoder options ({', '.join(base.decoder_options)}).")


def resolve_auto_decoder(base: RunSpec, meta: DatasetMeta, registry: Registry, seconds: float = 1.0) -> RunSpec:
    """`base` with `decoder` "auto" replaced by the fastest decoder here (`calibrate_decoders`, on a few of the
    selected episodes), its calibration recorded in `decoder_calibration`; any other `base` unchanged.

    Raises:
        DlError: decoder options given with "auto" (they belong to one decoder), or no decoder can run.
    """
    if base.decoder != AUTO:
        return base
    check_auto_options(base)
    episodes = meta.select(base.episodes)[:8]
    sequential = base.loader == "pool" and _budget(base.loader_options) != 0
    calibration = calibrate_decoders(meta, episodes, registry, seconds, sequential)
    return dataclasses.replace(base, decoder=calibration["chosen"], decoder_calibration=calibration)


def _budget(loader_options: dict) -> int | None:
    """The pool's decode budget in bytes (None: its default, a non-zero budget)."""
    budget = loader_options.get("decode_budget")
    return None if budget is None else parse_bytes(budget, "loader option decode_budget")
