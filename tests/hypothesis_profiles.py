"""Hypothesis example counts per profile: the counts written in the tests run under `ci` (CI=true, as .ci/run runs),
a tenth of them (at least 3) under `dev`, the default, so the README's test command stays fast. Choose with
HYPOTHESIS_PROFILE=ci|dev."""

import os

from hypothesis import settings

from dl.testing.examples import scaled

settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=10)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
settings.load_profile(PROFILE)


def examples(count: int) -> int:
    """`count` examples under the `ci` profile, in proportion under `dev` (at least 3)."""
    return scaled(count, least=3)
