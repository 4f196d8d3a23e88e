"""Scale-factor model, Appendix A load and the pscore metric."""

import pytest

from kit.errors import CepkitError
from kit.scale import ScaleModel, load, markets_for, pscore


@pytest.mark.parametrize("sf, markets, symbols, strategies, basis", [
    (9, 1, 100, 225, 5000), (10, 1, 100, 250, 5000), (11, 2, 200, 275, 10000)])
def test_table_a1(sf, markets, symbols, strategies, basis):
    m = ScaleModel.from_sf(sf)
    assert (m.markets, m.symbols, m.strategies, m.basis_rate_eps) == (markets, symbols, strategies, basis)
    assert m.correlations == symbols // 4
    assert m.peak_rate_eps == 1.5 * basis
    assert m.users == 5 * sf


@pytest.mark.parametrize("sf, p99_ms, expected", [
    # Table 7.1 of the thesis: engine X and engine Y.
    (1, 63, 47.62), (2, 175, 34.29), (3, 203, 44.33), (4, 351, 34.19), (5, 91_862, 0.16),
    (1, 22, 136.36), (2, 24, 250.00)])
def test_pscore_reproduces_table_7_1(sf, p99_ms, expected):
    assert round(pscore(sf, p99_ms / 1000), 2) == expected


def test_load_across_market_boundary():
    # Appendix A: going 10 -> 11 adds a market, so load jumps by more than one SF step.
    assert [load(sf) for sf in (1, 9, 10, 11, 20, 21)] == [3, 27, 30, 44, 80, 105]
    assert markets_for(20) == 2 and markets_for(21) == 3


@pytest.mark.parametrize("bad", [0, -3, 1.5, True])
def test_bad_scale_factor(bad):
    with pytest.raises(CepkitError, match="scale factor"):
        ScaleModel.from_sf(bad)


def test_pscore_rejects_zero_latency():
    with pytest.raises(CepkitError, match="p99 latency"):
        pscore(1, 0.0)


def test_overrides_checked():
    assert ScaleModel.from_sf(1, symbols=40).correlations == 10
    with pytest.raises(CepkitError, match="correlations"):
        ScaleModel.from_sf(1, symbols=40, correlations=30)
