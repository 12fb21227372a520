"""Where one plugin's needs meet another plugin's options, the host reconciles them, naming both: a plugin
never changes another's options. Today: how many video files the decoder keeps open, against how many the
loader reads in turn (`dl.contracts.loader.OpensFiles`)."""


from ..contracts.decoder import Decoder
from ..contracts.errors import warn
from ..contracts.loader import OpensFiles

MAX_OPEN_FILES = 256
"""The most decoders the host keeps open per process on a loader's behalf (each holds a few decoded frames)."""


def reconcile_open_files(loader_name: str, loader, decoder: Decoder) -> dict:
    """Keep as many decoders open as the loader reads video files in turn, up to `MAX_OPEN_FILES`, unless the
    user chose the decoder's cache size (`Decoder.cache_size_chosen`): then keep theirs and warn, once, that
    files will be reopened, naming both plugins and the size that would avoid it.

    Returns:
        What was decided, for the run's result: `{"capacity", "capacity_from"}` (empty when the loader does not
        say how many files it reads).
    """
    if not isinstance(loader, OpensFiles):
        return {}
    wanted, why = loader.open_files_wanted()
    have = decoder.cache.capacity
    reads = f"loader {loader_name} reads {wanted} video files in turn per consumer ({why})"
    if wanted <= have:
        return {"capacity": have, "capacity_from": f"decoder {decoder.name}; {reads}"}
    if decoder.cache_size_chosen:
        warn(f"{reads}, but decoder {decoder.name} keeps {have} open (its cache_size, as given): files past "
             f"{have} are reopened as the loader comes back to them. Raise --decoder-option "
             f"cache_size={min(wanted, MAX_OPEN_FILES)} (or leave it unset) to keep them open.")
        return {"capacity": have, "capacity_from": f"decoder {decoder.name}'s cache_size as given; {reads}"}
    size = min(wanted, MAX_OPEN_FILES)
    decoder.cache.resize(size)
    return {"capacity": size, "capacity_from": f"raised by the host from decoder {decoder.name}'s default {have}: "
                                               f"{reads}" + (f", at most {MAX_OPEN_FILES}" if size < wanted else "")}
