"""The intervals of results.summary(), against published values."""

from __future__ import annotations

import math

import pytest

from gr_notebook.experiments.stats import mean_interval, t_quantile, wilson_interval


@pytest.mark.parametrize(
    ("dof", "table"),
    [(1, 12.706), (2, 4.303), (3, 3.182), (5, 2.571), (10, 2.228), (19, 2.093), (100, 1.984)],
)
def test_t_quantile_matches_the_table_at_95_percent(dof: int, table: float) -> None:
    assert t_quantile(0.975, dof) == pytest.approx(table, rel=2e-3)


@pytest.mark.parametrize(("dof", "table"), [(3, 5.841), (4, 4.604), (9, 3.250), (29, 2.756)])
def test_t_quantile_is_within_one_percent_at_99_percent(dof: int, table: float) -> None:
    assert t_quantile(0.995, dof) == pytest.approx(table, rel=1e-2)


def test_wilson_interval_stays_inside_0_and_1_at_the_extremes() -> None:
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == pytest.approx(1.0)
    low, high = wilson_interval(7, 20)
    assert (low, high) == (pytest.approx(0.1812, abs=1e-4), pytest.approx(0.5671, abs=1e-4))
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_mean_interval_uses_students_t_and_skips_missing_values() -> None:
    mean, low, high = mean_interval([10, 12, 14, float("nan")])
    assert mean == 12
    assert high - mean == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-3)
    assert mean - low == pytest.approx(high - mean)
    mean, low, high = mean_interval([5])
    assert mean == 5 and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="confidence must be a number between 0 and 1"):
        mean_interval([1, 2], confidence=95)
