"""SpecAuto: the ctypes binding of include/dhs_spec_auto.h (the C test holds the algorithm to an
enumeration; here the binding's arguments, results and errors)."""
import numpy as np
import pytest

import dhisparse as dhs


def test_choose_and_estimate():
    sa = dhs.SpecAuto(4, spec_max=6, prior_weight=0)
    for _ in range(10):
        sa.observe(0, 6, 0)  # never accepts
        sa.observe(1, 6, 5)  # always accepts
    assert sa.estimate(0) == 0.0
    assert sa.estimate(1) == 1.0
    K, tpu = sa.choose([0, 1], [10.0, 10.0], 1000.0, 1.0)
    assert list(K) == [1, 6]
    # 1 + 6 expected tokens over 1000 + 5 * 10 + 5 * 1 us
    assert tpu == pytest.approx(7 / 1055)
    K, _ = sa.choose([0, 1], [10.0, 10.0], 1000.0, 1.0, cap=[1, 3])
    assert list(K) == [1, 3]
    sa.close()


def test_errors_leave_nothing_changed():
    sa = dhs.SpecAuto(2)
    a = sa.estimate(1)
    with pytest.raises(dhs.DhsError):
        sa.observe(1, 2, 2)
    with pytest.raises(dhs.DhsError):
        sa.observe(2, 2, 0)
    assert sa.estimate(1) == a
    with pytest.raises(dhs.DhsError):
        sa.choose([1, 1], [1.0, 1.0], 10.0, 0.0)  # the same slot twice
    with pytest.raises(ValueError):
        sa.choose([0, 1], [1.0], 10.0, 0.0)
    K, _ = sa.choose(np.array([0, 1]), [1.0, 1.0], 10.0, 0.0)
    assert K.dtype == np.int32 and all(1 <= k <= sa.spec_max for k in K)


def test_miss_cost():
    sa = dhs.SpecAuto(2, spec_max=8, prior_weight=0)
    for _ in range(20):
        sa.observe(0, 8, 7)
        sa.observe(1, 8, 7)
    K0, _ = sa.choose([0, 1], [10.0, 10.0], 1000.0, 1.0)
    assert list(K0) == [8, 8]
    for r in range(100):  # 1000 rows per further query at 1 us a row
        n, q = 1 + r % 2, 1 + r % 2 + r % 5
        rows = 50.0 * n + 1000.0 * (q - n)
        sa.observe_round(n, q, rows, rows * 1.0)
    f, e, ru = sa.miss_model()
    assert 0 <= f < 100 and e == pytest.approx(1000, rel=0.05) and ru == pytest.approx(1.0)
    K, _ = sa.choose_round([0, 1], [10.0, 10.0], 1000.0, 1.0)
    assert list(K) == [1, 1]
    with pytest.raises(dhs.DhsError):
        sa.observe_round(2, 1, 0.0)
    with pytest.raises(dhs.DhsError):
        sa.set_row_us(-1.0)


def test_choose_round_matches_choose_without_misses():
    """before any observe_round there is no miss model: choose_round (room unbounded) answers as choose;
    its caps and argument checks are the same"""
    sa = dhs.SpecAuto(4, spec_max=6, prior_weight=0)
    for _ in range(10):
        sa.observe(0, 6, 0)
        sa.observe(1, 6, 5)
    assert list(sa.choose_round([0, 1], [10.0, 10.0], 1000.0, 1.0)[0]) == list(sa.choose([0, 1], [10.0, 10.0], 1000.0, 1.0)[0]) == [1, 6]
    K, _ = sa.choose_round([0, 1], [10.0, 10.0], 1000.0, 1.0, room_rows=-1.0, cap=[1, 3])
    assert list(K) == [1, 3]
    with pytest.raises(ValueError):
        sa.choose_round([0, 1], [1.0], 10.0, 0.0)
    with pytest.raises(dhs.DhsError):
        sa.choose_round([1, 1], [1.0, 1.0], 10.0, 0.0)
    sa.close()
