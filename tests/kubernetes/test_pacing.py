"""When `kai run` may start an early cycle for an arrival (`kai.kubernetes.pacing.BusyWindow`)."""

from __future__ import annotations

import pytest

from kai.kubernetes.pacing import BusyWindow


def test_a_lone_arrival_after_a_cycle_is_scheduled_at_once() -> None:
    pacing = BusyWindow(window=1.0)
    pacing.record(10.0, 10.3)
    assert pacing.earliest(10.3) == 10.3


def test_arrivals_in_a_stream_keep_the_loop_at_most_half_busy() -> None:
    pacing = BusyWindow(window=1.0)
    pacing.record(10.0, 10.3)
    pacing.record(10.3, 10.6)
    # 0.6 s of the last second were cycles: the next may start once only 0.5 s of the second before it was
    assert pacing.earliest(10.6) == pytest.approx(11.1, abs=1e-6)
    assert pacing.busy(11.1) == pytest.approx(0.5, abs=1e-6)


def test_a_cycle_longer_than_the_budget_waits_until_it_is_half_out_of_the_window() -> None:
    pacing = BusyWindow(window=1.0)
    pacing.record(5.0, 7.0)
    assert pacing.earliest(7.0) == pytest.approx(7.5, abs=1e-6)


def test_cycles_out_of_the_window_are_forgotten() -> None:
    pacing = BusyWindow(window=1.0)
    pacing.record(0.0, 0.9)
    pacing.record(5.0, 5.1)
    assert pacing.busy(5.1) == pytest.approx(0.1)
    assert pacing.earliest(5.1) == 5.1
