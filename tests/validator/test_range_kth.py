"""The reference engine's range order statistics (validator/range_kth.py) against numpy on every
range: ties, one-element ranges, ranges across block boundaries, and a sliding window."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from validator.micro_windows import RangeAggregator
from validator.range_kth import range_kth, range_median


def _naive_kth(v, lo, hi, k):
    return np.array([np.sort(v[a:b])[c] for a, b, c in zip(lo, hi, k)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=60), st.integers(1, 16), st.data())
def test_kth_is_numpys_on_any_ranges(values, block, data):
    """Small integers, so ties abound; tiny blocks, so ranges cross block boundaries."""
    v = np.array(values, dtype=float)
    n = len(v)
    q = data.draw(st.integers(1, 30))
    lo = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=q, max_size=q)))
    hi = np.array([data.draw(st.integers(a + 1, n)) for a in lo])
    k = np.array([data.draw(st.integers(0, b - a - 1)) for a, b in zip(lo, hi)])
    (got,) = range_kth(v, lo, hi, k, block=block)
    assert np.array_equal(got, _naive_kth(v, lo, hi, k))
    expected = np.array([np.median(v[a:b]) for a, b in zip(lo, hi)])
    assert np.array_equal(range_median(v, lo, hi, block=block), expected)


def test_a_sliding_median_over_many_blocks_is_exact():
    rng = np.random.default_rng(7)
    v = rng.normal(size=5_000).round(2)           # rounded: ties
    w = 300
    lo = np.maximum(np.arange(5_000) - w + 1, 0)
    hi = np.arange(1, 5_001)
    expected = np.array([np.median(v[a:b]) for a, b in zip(lo, hi)])
    assert np.array_equal(range_median(v, lo, hi, block=512), expected)
    assert np.array_equal(RangeAggregator(v).median(lo, hi), expected)


def test_no_ranges_and_bad_ranges():
    assert range_median(np.arange(3.0), np.array([], dtype=int), np.array([], dtype=int)).shape == (0,)
    with pytest.raises(ValueError, match="hi > lo"):
        range_kth(np.arange(3.0), np.array([1]), np.array([1]), np.array([0]))
    with pytest.raises(ValueError, match="0 <= k"):
        range_kth(np.arange(3.0), np.array([0]), np.array([2]), np.array([2]))
