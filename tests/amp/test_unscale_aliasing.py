"""An in-place unscale divides every value once: a repeated array is unscaled once, and arrays
that partly overlap are refused (no order of in-place updates would be right)."""
import numpy as np
import pytest

from minigrad import Tensor
from minigrad.amp import float_status
from minigrad.amp import float_status as fs


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_check_and_unscale_of_the_same_array_twice_unscales_it_once(dtype):
    a = np.full(5, 8.0, dtype)
    fs.check_and_unscale(fs.alloc_status(), [a, a], 0.5)
    assert (a == 4.0).all()


def test_the_same_tensor_twice_and_its_array_are_one_array():
    a = np.full((2, 3), 8.0, np.float32)
    fs.check_and_unscale(fs.alloc_status(), [Tensor(a), a], 0.25)
    t = Tensor(np.full(3, 8.0, np.float32))
    fs.check_and_unscale(fs.alloc_status(), [t, t], 0.25)
    assert (a == 2.0).all() and (t.asnumpy() == 2.0).all()


def test_the_training_steps_lean_path_unscales_a_repeat_once():
    a = np.full(1000, 8.0, np.float32)
    out, overflow = float_status.unscale_and_check([a, a], 2.0)
    assert not overflow and (a == 4.0).all() and out[0] is a and out[1] is a


def test_partly_overlapping_views_are_refused_before_anything_changes():
    x = np.full(6, 8.0, np.float32)
    with pytest.raises(ValueError, match=r"arrays\[0\] and arrays\[1\] share memory"):
        fs.check_and_unscale(fs.alloc_status(), [x[:4], x[2:]], 0.5)
    assert (x == 8.0).all()


def test_interleaved_views_do_not_overlap_and_are_both_unscaled():
    x = np.full(6, 8.0, np.float32)
    fs.check_and_unscale(fs.alloc_status(), [x[::2], x[1::2]], 0.5)
    assert (x == 4.0).all()


def test_a_check_alone_still_takes_overlapping_views():
    x = np.array([1.0, np.inf, 3.0], np.float32)
    status = fs.check_overflow(fs.alloc_status(), x[:2], x[1:])
    assert fs.get_status(status)
