"""dl.bench.steady: rates at steady state, with the spread of their blocks, and the warm-up left out."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from dl.bench.steady import SteadyTimer, block_rates, spread_pct


def test_block_rates_count_events_per_block_and_drop_a_short_last_block():
    times = [0.1, 0.2, 0.6, 1.1, 1.2, 1.3, 2.05]
    assert block_rates(times, [1] * 7, 0.0, 2.05, 1.0) == [3.0, 3.0]  # 2.0-2.05 is a short last block
    assert block_rates([0.1, 0.3], [16, 16], 0.0, 0.4, 1.0) == pytest.approx([80.0])  # shorter than one block


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(st.floats(1, 1e4, allow_nan=False), min_size=2, max_size=40))
def test_the_spread_is_the_middle_80_percent_over_the_median(rates):
    spread = spread_pct(rates)
    assert spread is not None and spread >= 0
    assert spread_pct([r * 3 for r in rates]) == pytest.approx(spread, abs=0.11)  # relative, whatever the scale
    assert spread_pct([rates[0]] * len(rates)) == 0.0
    assert spread_pct(rates[:1]) is None


def test_the_timer_leaves_the_warm_up_out_and_measures_at_least_the_time_and_the_events_asked():
    started = []
    timer = SteadyTimer(warmup_s=0.05, seconds=0.1, min_events=30, limit_s=5.0, on_start=lambda: started.append(1))
    ticks = 0
    while not timer.tick():
        ticks += 1
        time.sleep(0.002)
    assert started == [1] and timer.samples >= 30 and timer.measured_s >= 0.1
    assert ticks - timer.samples >= 1  # the warm-up's ticks (at least the first) are not counted
    rates = timer.block_rates()
    assert rates and all(r > 0 for r in rates)


def test_the_timer_stops_at_its_limit_when_events_are_too_slow():
    timer = SteadyTimer(warmup_s=0.0, seconds=0.01, min_events=10**6, limit_s=0.05)
    t0 = time.perf_counter()
    while not timer.tick():
        time.sleep(0.005)
    assert time.perf_counter() - t0 < 1 and timer.samples < 10**6
