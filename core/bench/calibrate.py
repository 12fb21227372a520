"""`dl run --decoder auto`: time every decoder that can run on this machine on the dataset at hand and pick the
fastest, in the host, before any run starts; the calibration goes into every run's spec and result."""

import dataclasses

from ..contracts.errors import CodecUnsupportedError, DlError
from ..contracts.units import parse_bytes
from ..format.metadata import DatasetMeta
from ..host.registry import Registry
from .ceiling import TRIALS, CeilingPlan, local_copies, measure_trials
from .spec import RunSpec

AUTO = "auto"


def calibrate_decoders(meta: DatasetMeta, episodes: list, registry: Registry, seconds: float,
                       sequential: bool) -> dict:
    """Build every registered decoder with its default options and measure it on `episodes` of `meta`: random
    single frames/s and sequential frames/s (`dl.bench.ceiling`: each the best of its trials, `seconds` in all per
    kind), in this process. A decoder that cannot run here (its factory raises `DlError`: no GPU...) is listed
    with its reason; one that runs but cannot decode the dataset's codec (`CodecUnsupportedError`: AV1 on an H100's
    NVDEC) with the reason in one line and the `dl transcode` command that makes the dataset decodable by it.

    Args:
        sequential: rank by sequential frames/s (a loader that decodes runs: `pool` with a decode budget)
            instead of random single frames/s (`map`).

    Returns:
        `{"chosen", "by", "seconds", "decoders": {name: {"random_frames_per_s", "sequential_frames_per_s"} or
        {"unavailable": reason} or {"unavailable": reason, "codec": codec, "fix": command}}}`.

    Raises:
        DlError: no decoder can run here, or the dataset has no cameras.
    """
    if not meta.camera_keys:
        raise DlError(f"--decoder auto: {meta.source.url} has no cameras to time decoders on; give --decoder NAME.")
    by = "sequential_frames_per_s" if sequential else "random_frames_per_s"
    found: dict[str, dict] = {}
    with local_copies(meta, episodes) as held:
        for name in registry.names("decoder"):
            try:
                decoder = registry.create("decoder", name)
                trials = measure_trials(meta, decoder, held, CeilingPlan(trial_s=seconds / TRIALS))
                found[name] = {f"{kind}_frames_per_s": round(max(rates), 1) for kind, rates in trials.items()}
            except CodecUnsupportedError as exc:
                found[name] = {"unavailable": f"cannot decode {exc.codec} on {exc.device}", "codec": exc.codec,
                               "fix": exc.fix}
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
