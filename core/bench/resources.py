"""What a run asks of a cluster (`dl.contracts.scheduler.Run.resources`): the spec's own `resources` (a scenario's
defaults, then `--resource KEY=VALUE`) completed from its world size and workers, and checked before
anything is submitted."""

import re

from ..contracts.errors import DlError
from ..contracts.scheduler import RESOURCES
from .spec import RunSpec

_MEM = re.compile(r"^\d+[KMGT]?$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


def run_resources(spec: RunSpec) -> dict:
    """`nodes`, `tasks_per_node`, `cpus_per_task` always (defaults: one node holding every rank, workers + 1
    cores per rank), `mem`, `time`, `gpus` when given.

    Raises:
        DlError: an unknown key, a count that is not a positive integer, a malformed `mem` or `time`, or
            nodes x tasks_per_node different from the run's world size.
    """
    given = dict(spec.resources)
    unknown = sorted(set(given) - set(RESOURCES))
    if unknown:
        raise DlError(f"run {spec.name}: unknown resource(s) {', '.join(unknown)}; known: "
                      + "; ".join(f"{k} ({v})" for k, v in RESOURCES.items()) + ".")
    for key in ("nodes", "tasks_per_node", "cpus_per_task", "gpus"):
        value = given.get(key)
        least = 0 if key == "gpus" else 1
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise DlError(f"run {spec.name}: resource {key}={value!r} must be an integer >= {least}.")
    if "mem" in given and not _MEM.match(str(given["mem"])):
        raise DlError(f"run {spec.name}: resource mem={given['mem']!r}: write MB as an integer, or 512M, 8G, 1T.")
    if "time" in given and not _TIME.match(str(given["time"])):
        raise DlError(f"run {spec.name}: resource time={given['time']!r}: write minutes, HH:MM:SS or D-HH:MM:SS.")
    nodes, per_node, world = given.get("nodes"), given.get("tasks_per_node"), spec.world_size
    if nodes is None and per_node is None:
        nodes, per_node = 1, world
    elif nodes is None:
        nodes = world // per_node if world % per_node == 0 else 0
    elif per_node is None:
        per_node = world // nodes if world % nodes == 0 else 0
    if nodes * per_node != world:
        raise DlError(f"run {spec.name}: world size {world} cannot be spread as nodes={given.get('nodes')} x "
                      f"tasks_per_node={given.get('tasks_per_node')}; nodes x tasks_per_node must equal the world "
                      "size (--world-size).")
    out = {"nodes": nodes, "tasks_per_node": per_node,
           "cpus_per_task": given.get("cpus_per_task", spec.num_workers + 1)}
    return {**out, **{k: given[k] for k in ("mem", "time", "gpus") if k in given}}
