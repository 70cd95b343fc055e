"""The overflow benchmark's methods on the CPU: each one's calls pass their checks on finite and
one-inf inputs, and a wrong kernel, a wrong unscale or a wrong ceiling is caught."""
import numpy
import pytest

from minigrad.amp import float_status as fs
from minigrad.bench import cases, methods
from minigrad.bench.methods import WrongResult

SLOTS = 4


def case_of(kind, dtype, finite):
    sizes = [3000] if kind == "array" else [5, 700, 64, 1]
    return cases.Case(numpy, kind, kind, sizes, numpy.dtype(dtype), finite)


def run_calls(method, calls=SLOTS):
    method.reset()
    for i in range(calls):
        method.call(i)
    method.check(calls)


@pytest.mark.parametrize("finite", [True, False], ids=["finite", "one-inf"])
@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
@pytest.mark.parametrize("kind", ["array", "list"])
def test_every_method_passes_its_own_checks(kind, dtype, finite):
    case = case_of(kind, dtype, finite)
    found = methods.methods_for(case, SLOTS, peers=[], torch=None)
    names = [m.name for m in found]
    assert names[:2] == ["minigrad check", "minigrad check+unscale"]
    assert names[-2:] == ["copy ceiling", "read ceiling"]
    assert ("minigrad fp16->fp32 check+unscale" in names) == (dtype == numpy.float16)
    assert ("numpy isfinite(x).all()" in names) == (kind == "array")
    for method in found:
        for calls in (1, SLOTS, 3):  # odd and even numbers of in-place unscales
            run_calls(method, calls)
    assert case.unscales == 8


def test_traffic_counts_bytes_read_and_written():
    case = case_of("array", numpy.float16, True)
    traffic = {m.name: m.traffic() for m in methods.methods_for(case, 1, [], None)}
    n = case.nbytes
    assert traffic == {"minigrad check": n, "minigrad check+unscale": 2 * n,
                       "minigrad fp16->fp32 check+unscale": 3 * n,
                       "numpy isfinite(x).all()": n + 2 * 3000,
                       "copy ceiling": 2 * case.flat.nbytes, "read ceiling": case.flat.nbytes}


def test_a_check_that_misses_the_inf_fails(monkeypatch):
    case = case_of("array", numpy.float16, finite=False)
    method = methods.MinigradCheck(case, SLOTS)
    monkeypatch.setattr(fs, "check_overflow", lambda status, *arrays: status)
    with pytest.raises(WrongResult, match=r"minigrad check: call 0 of 4 left the flag"):
        run_calls(method)


def test_a_flag_written_outside_element_0_fails(monkeypatch):
    case = case_of("array", numpy.float32, finite=True)
    method = methods.MinigradCheck(case, SLOTS)
    monkeypatch.setattr(fs, "check_overflow",
                        lambda status, *arrays: status.__setitem__(3, 1.0))
    with pytest.raises(WrongResult, match="expected 0.0 in element 0 only"):
        run_calls(method)


def test_an_unscale_that_skips_one_call_fails(monkeypatch):
    case = case_of("list", numpy.float16, finite=True)
    method = methods.MinigradUnscale(case, SLOTS)
    real = fs.check_and_unscale
    seen = []

    def skips_the_third(status, arrays, inv_scale):
        seen.append(inv_scale)
        return status if len(seen) == 3 else real(status, arrays, inv_scale)
    monkeypatch.setattr(fs, "check_and_unscale", skips_the_third)
    with pytest.raises(WrongResult, match="sampled values wrong"):
        run_calls(method)


def test_a_widening_with_the_wrong_scale_fails(monkeypatch):
    case = case_of("array", numpy.float16, finite=True)
    monkeypatch.setattr(methods, "WIDEN_INV_SCALE", 0.5)
    method = methods.MinigradWiden(case, SLOTS)
    method.reset()
    method.call(0)
    monkeypatch.setattr(methods, "WIDEN_INV_SCALE", 0.25)
    with pytest.raises(WrongResult, match="the fp32 output of the last call"):
        method.check(1)


def test_a_wrong_isfinite_answer_and_a_wrong_ceiling_fail():
    case = case_of("array", numpy.float32, finite=False)
    answers = methods.ArrayAllFinite(case, SLOTS)
    run_calls(answers)
    answers.answers[2] = numpy.True_
    with pytest.raises(WrongResult, match="call 2 of 4 answered True for non-finite data"):
        answers.check(SLOTS)
    read = methods.ReadCeiling(case, SLOTS)
    run_calls(read)
    read.answers[1] ^= numpy.uint64(1)
    with pytest.raises(WrongResult, match="read ceiling: call 1 of 4"):
        read.check(SLOTS)
    copy = methods.CopyCeiling(case, SLOTS)
    copy.reset()  # no call: the target holds zeros at the sampled positions
    with pytest.raises(WrongResult, match="the copy"):
        copy.check(1)


def test_torch_peers_on_the_cpu_pass_their_checks():
    torch = pytest.importorskip("torch")
    for finite in (True, False):
        case = case_of("array", numpy.float16, finite)
        found = methods.methods_for(case, SLOTS, ["torch"], torch)
        peers = [m for m in found if m.role == "peer"]
        assert [m.name for m in peers] == ["torch fused check+unscale",
                                           "torch isfinite(x).all()", "numpy isfinite(x).all()"]
        for method in peers:
            run_calls(method)
            run_calls(method, 1)
