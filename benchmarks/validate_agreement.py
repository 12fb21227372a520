"""`dl validate` against the loaders on one parity case variant (`benchmarks/lerobot_parity.py cases`): validate must
find exactly the episodes a loader refuses, and refuse nothing it serves."""


def report(name: str, spec: dict) -> bool:
    """Print whether `dl validate` agrees with the loader on case variant `name`; returns whether it does."""
    differs = disagreement(spec)
    print(f"{name}: dl validate {'DISAGREES with the loader: ' + differs if differs else 'agrees'}", flush=True)
    return not differs


def disagreement(spec: dict) -> str:
    """"" when `dl validate` (first and last frames decoded) finds errors in exactly the episodes that the `map`
    loader refuses, each episode read alone at every position with the variant's `tolerance_s`, `frame_pairing`
    and windows; else what differs, in words."""
    import warnings

    import dl
    from dl.format.validation import validate
    from dl.host.assembly import build_decoder, open_dataset

    try:
        meta = open_dataset(spec["root"])
    except dl.DlError:
        return ""  # `dl validate` opens it the same way: both refuse it
    chosen = spec["episodes"] or sorted(meta.episodes)
    refused = set()
    for episode in chosen:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ds = dl.make_dataset(spec["root"], episodes=[episode], delta_timestamps=spec["delta"],
                                     tolerance_s=spec["tolerance_s"], frame_pairing=spec["frame_pairing"])
                for position in range(len(ds)):
                    ds[position]
            except dl.DlError:
                refused.add(episode)
    found = validate(meta, build_decoder("cpu"), spec["episodes"], tolerance_s=spec["tolerance_s"],
                     frame_pairing=spec["frame_pairing"], decode="ends").errors
    flagged = {e for f in found for e in f.episodes}
    if flagged == refused and (flagged or not found):
        return ""
    return (f"validate flags episode(s) {sorted(flagged)} ({len(found)} error(s)), the loader refuses "
            f"{sorted(refused)}")

