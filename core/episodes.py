"""Episode selections as users write them: "0,3-6,8"."""

from .errors import DlError


def parse_episodes(text: str) -> list[int]:
    """Parse a comma-separated list of episode indices and inclusive ranges.

    "0,3-6,8" -> [0, 3, 4, 5, 6, 8]. Duplicates are dropped; order is ascending.

    Raises:
        DlError: on an empty item, a non-integer, a negative index, or a range whose end is before its start.
    """
    out: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        try:
            if "-" in item:
                a, b = (int(x) for x in item.split("-", 1))
                if b < a:
                    raise DlError(f"--episodes: the range {item!r} ends before it starts; write {b}-{a}.")
                out.update(range(a, b + 1))
            else:
                out.add(int(item))
        except ValueError:
            raise DlError(
                f"--episodes: cannot read {item!r} in {text!r}; write indices and inclusive ranges such as "
                "'0,3-6,8'."
            ) from None
    if any(i < 0 for i in out):
        raise DlError(f"--episodes: episode indices are >= 0, got {text!r}.")
    return sorted(out)
