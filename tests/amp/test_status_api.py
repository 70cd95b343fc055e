"""One status constructor and one meaning of all_finite per face."""
import numpy as np
import pytest

from minigrad import Tensor, ops
from minigrad._config import using_config
from minigrad.amp import all_finite, float_status, init_status


def test_init_status_is_the_status_alloc_status_makes():
    with using_config(device_target="CPU"):
        a, b = init_status(), float_status.alloc_status()
    assert type(a) is type(b) and a.shape == b.shape == (8,) and a.dtype == b.dtype
    assert type(ops.NPUAllocFloatStatus()()) is type(a)


def test_both_all_finite_give_the_same_answer_in_their_face_s_type():
    good = [Tensor(np.ones(3, np.float32))]
    bad = [Tensor(np.array([1.0, np.nan], np.float16))]
    assert float_status.all_finite(good) is True and float_status.all_finite(bad) is False
    assert bool(all_finite(good).asnumpy()) is True and bool(all_finite(bad).asnumpy()) is False
    assert all_finite(good).shape == ()


def test_mindspore_all_finite_records_into_the_status_it_is_given():
    status = init_status()
    assert bool(all_finite([Tensor(np.ones(2, np.float32))], status).asnumpy())
    assert not float_status.get_status(status)
    assert not bool(all_finite([Tensor(np.array([np.inf], np.float32))], status).asnumpy())
    assert float_status.get_status(status)  # sticky: set in the caller's buffer
    with pytest.raises(ValueError, match="shape"):
        all_finite([Tensor(np.ones(2, np.float32))], Tensor(np.zeros(3, np.float32)))
