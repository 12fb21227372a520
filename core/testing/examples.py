"""How many examples a hypothesis test draws: a count written for hypothesis' default of 100 examples per test,
scaled to the loaded profile, so a project whose default profile draws fewer (dl's own tests draw a tenth outside CI:
tests/hypothesis_profiles.py) runs every suite faster, and one at hypothesis' default runs the counts as written."""

from hypothesis import settings


def scaled(count: int, least: int = 2) -> int:
    """`count` examples at a profile of 100 (hypothesis' default), in proportion for the loaded profile's
    `max_examples`, at least `least`. Read when the test module is imported: load the profile before (a conftest)."""
    return max(least, count * settings.default.max_examples // 100)
