"""Benchmark modes: the `delta_timestamps` each mode asks for, on the dataset's own key names."""

from ..contracts.errors import DlError
from ..format.metadata import DatasetMeta

SARM_STEPS, CHUNK_STEPS = 8, 16


def action_key(meta: DatasetMeta) -> str:
    """The dataset's action feature: `action` (LeRobot's name) or a dataset's own, such as `actions`.

    Raises:
        DlError: no feature looks like an action; pass an explicit --delta-timestamps instead.
    """
    for key in ("action", "actions"):
        if key in meta.features:
            return key
    candidates = [k for k in meta.features if k.startswith("action")]
    if len(candidates) == 1:
        return candidates[0]
    raise DlError(f"{meta.source.url} has no 'action' feature (features: {', '.join(meta.features)}); "
                  "use --mode single with --delta-timestamps KEY=OFFSETS for your key.")


def mode_delta_timestamps(mode: str, meta: DatasetMeta) -> dict[str, list[float]]:
    """`{key: [offsets in s]}` for a mode.

    - single: none (one frame per camera).
    - sarm: offsets 0, 1, ..., 7 s on every camera and on the action (a SARM-style reward-model window).
    - chunk: a 16-step action chunk at 1/fps (ACT / diffusion-policy style action chunking).
    """
    if mode == "single":
        return {}
    if mode == "sarm":
        steps = [float(s) for s in range(SARM_STEPS)]
        return {key: steps for key in [*meta.camera_keys, action_key(meta)]}
    if mode == "chunk":
        return {action_key(meta): [s / meta.fps for s in range(CHUNK_STEPS)]}
    raise DlError(f"unknown mode {mode!r}; choose single, sarm or chunk.")
