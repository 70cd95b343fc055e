"""The overflow benchmark's inputs: sizes and lists as the command line spells them, the models'
parameter shapes, and a Case's buffer, views, +inf and expected values."""
import numpy
import pytest

from minigrad.bench import cases


def test_sizes_parse_and_print():
    assert [cases.parse_size(t) for t in ("4K", "256M", "1G", "1GiB", "7", "64kb")] == [
        4096, 256 << 20, 1 << 30, 1 << 30, 7, 65536]
    assert [cases.format_bytes(n) for n in (4096, 256 << 20, 1 << 30, 1000)] == [
        "4 KiB", "256 MiB", "1 GiB", "1000 B"]
    for bad in ("", "0", "-4K", "4Q", "K"):
        with pytest.raises(ValueError, match="a size must be a positive count"):
            cases.parse_size(bad)


def test_model_lists_have_the_real_parameter_counts():
    resnet, gpt2 = cases.resnet50_shapes(), cases.gpt2_small_shapes()
    assert len(resnet) == 161 and sum(int(numpy.prod(s)) for s in resnet) == 25_557_032
    assert len(gpt2) == 148 and sum(int(numpy.prod(s)) for s in gpt2) == 124_439_808
    label, sizes = cases.parse_list("resnet50")
    assert label == "resnet50 (161 tensors)" and sizes[:3] == [64 * 3 * 7 * 7, 64, 64]
    assert cases.parse_list("1024x16K") == ("1024 x 16384 elements", [16384] * 1024)
    with pytest.raises(ValueError, match="a list must be one of"):
        cases.parse_list("vgg")


def test_resnet50_shapes_match_torchvision_where_installed():
    models = pytest.importorskip("torchvision.models")
    net = models.resnet50(weights=None)
    assert [tuple(p.shape) for p in net.parameters()] == cases.resnet50_shapes()


@pytest.mark.parametrize("dtype", [numpy.float16, numpy.float32])
def test_the_pattern_survives_halving_and_doubling_exactly(dtype):
    pattern = cases.exact_pattern(numpy.dtype(dtype))
    assert numpy.isfinite(pattern).all() and numpy.abs(pattern).min() >= 2.0 ** -8
    back = (pattern * dtype(0.5)) * dtype(2.0)
    numpy.testing.assert_array_equal(back.view(f"u{pattern.itemsize}"),
                                     pattern.view(f"u{pattern.itemsize}"))


def test_a_list_case_is_views_of_one_aligned_buffer():
    case = cases.Case(numpy, "list", "three", [5, 300, 1], numpy.float16, finite=False)
    assert [a.size for a in case.arrays] == [5, 300, 1] and case.nbytes == 612
    assert list(case.starts) == [0, 128, 512]  # each tensor starts on a 256-byte boundary
    for a in case.arrays:
        assert a.base is not None and numpy.shares_memory(a, case.flat)
    assert case.inf_at == 128 + 150 and numpy.isinf(case.flat[case.inf_at])
    assert numpy.isinf(case.flat).sum() == 1
    assert {0, 4, 128, 427, 512} <= set(case.positions.tolist())
    assert [(k, list(v)) for k, v in case.per_array(numpy.array([1, 130, 512]))] == [
        (0, [1]), (1, [2]), (2, [0])]


def test_expected_follows_the_in_place_unscales():
    case = cases.Case(numpy, "array", "4 KiB", [2048], numpy.float32, finite=False)
    start = case.flat.copy()
    numpy.testing.assert_array_equal(case.flat[case.positions], case.expected())
    for _ in range(3):
        case.flat *= numpy.float32(case.next_inv_scale())
        numpy.testing.assert_array_equal(case.flat[case.positions], case.expected())
    case.flat *= numpy.float32(case.next_inv_scale())
    numpy.testing.assert_array_equal(case.flat, start)  # an even count leaves the data as it was
