"""ScaleCore.state_dict / load_state_dict: a round trip continues the same trajectory; bad input
changes nothing and names the key."""
import re

import numpy
import pytest

from minigrad.amp import ScaleCore


def _run(core, outcomes):
    return [float(core.update(o)) for o in outcomes]


def test_round_trip_continues_the_trajectory():
    outcomes = [False] * 5 + [True, True, False, False, False, True] + [False] * 9
    a = ScaleCore(2.0**10, growth_interval=3, floor=4.0, cap=2.0**12, hysteresis=2)
    _run(a, outcomes[:7])
    b = ScaleCore(1.0)
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict()
    assert _run(b, outcomes[7:]) == _run(a, outcomes[7:])
    assert isinstance(b.scale, numpy.float32)


@pytest.mark.parametrize("change,error,match", [
    ({"scale": -1.0}, ValueError, r"scale must be a finite float in \(0\.0, inf\), got -1\.0"),
    ({"scale": float("inf")}, ValueError, r"scale must be a finite float in \(.*, got inf"),
    ({"backoff_factor": 2.0}, ValueError, r"backoff_factor must be .* in \(0\.0, 1\.0\), got 2\.0"),
    ({"growth_interval": 1.5}, TypeError, r"growth_interval must be a positive int, got 1\.5"),
    ({"counter": -1}, ValueError, "counter must be a non-negative int, got -1"),
    ({"tolerance": 3}, ValueError,
     r"^ScaleCore.load_state_dict: tolerance must be <= hysteresis \(2\), got 3$"),
    ({"hysteresis": "2"}, TypeError, "hysteresis must be a positive int, got '2' \\(str\\)"),
    ({"surprise": 1}, ValueError,
     r"^ScaleCore.load_state_dict: state_dict keys must be a subset of \['backoff_factor', .*, "
     r"'tolerance'\] \(unknown \['surprise'\]\), got \['backoff_factor', "),
])
def test_bad_state_changes_nothing(change, error, match):
    core = ScaleCore(256.0, growth_interval=4, hysteresis=2)
    core.update(False)
    before = core.state_dict()
    state = dict(before, **change)
    with pytest.raises(error, match=match):
        core.load_state_dict(state)
    assert core.state_dict() == before


def test_missing_keys_and_non_dicts():
    core = ScaleCore(8.0)
    state = core.state_dict()
    del state["counter"]
    with pytest.raises(
        KeyError,
        match=r"ScaleCore.load_state_dict: state_dict keys must be a superset of "
        r"\['backoff_factor', .*\] \(missing \['counter'\]\), got \['backoff_factor', 'cap', "
        r"'floor'",
    ):
        core.load_state_dict(state)
    with pytest.raises(
        TypeError,
        match=r"^ScaleCore.load_state_dict: state_dict must be a dict, got \[\('scale', 1\.0\)\] "
        r"\(list\)$",
    ):
        core.load_state_dict([("scale", 1.0)])


def test_a_fixed_scale_round_trips():
    fixed = ScaleCore(128.0, growth_interval=None)
    other = ScaleCore(1.0)
    other.load_state_dict(fixed.state_dict())
    assert not other.dynamic and float(other.update(False)) == 128.0


def test_a_floor_above_the_cap_is_refused():
    with pytest.raises(ValueError, match=r"^ScaleCore: floor must be <= cap \(4\.0\), got 16\.0$"):
        ScaleCore(8.0, floor=16.0, cap=4.0)
    core = ScaleCore(8.0, floor=2.0, cap=16.0)
    before = core.state_dict()
    with pytest.raises(
        ValueError, match=r"^ScaleCore.load_state_dict: floor must be <= cap \(16\.0\), got 32\.0$"
    ):
        core.load_state_dict(dict(before, floor=32.0))
    assert core.state_dict() == before


@pytest.mark.parametrize("scale", [1e39, 1e-46])
def test_a_scale_outside_float32_is_refused_not_turned_into_inf_or_0(scale):
    match = r"scale must be a float32 value in \[.*\], got " + re.escape(repr(scale))
    with pytest.raises(ValueError, match=match):
        ScaleCore(scale)
    core = ScaleCore(256.0, growth_interval=4)
    before = core.state_dict()
    with pytest.raises(ValueError, match=match):
        core.load_state_dict(dict(before, scale=scale))
    assert core.state_dict() == before
