"""minigrad.amp.float_status: the shared unscale-and-check of every face and the overflow
status it fills (copies check into their own buffer)."""
import copy

import numpy as np

from minigrad.amp import float_status


def test_deepcopy_of_overflow_status_checks_into_its_own_buffer():
    from minigrad.amp import float_status
    status = float_status.OverflowStatus()
    status.clear()
    status.unscale_and_check([np.ones(4, np.float32)], 2.0)
    twin = copy.deepcopy(status)
    twin.clear()
    twin.unscale_and_check([np.array([np.inf], np.float32)], 2.0)
    assert twin.overflow() and not status.overflow()
    flagged = copy.deepcopy(twin)  # a copy keeps the flag it had
    assert flagged.overflow() and flagged._host_address != twin._host_address


def test_unscale_and_check_flags_values_that_overflow_once_unscaled():
    # the shared step of every face (step.unscale_and_check): fp32 in place, fp16 widened to fp32
    g32 = np.array([1.0, 3e38, -2e38], np.float32)
    g16 = np.array([65504, 1], np.float16)
    out, overflow = float_status.unscale_and_check([g32], 0.5)
    assert overflow and np.isinf(out[0][1:]).all()
    out, overflow = float_status.unscale_and_check([None, g16], 1e-36)
    assert overflow and out[0] is None and out[1].dtype == np.float32 and np.isinf(out[1][0])
    out, overflow = float_status.unscale_and_check(
        [np.array([3e38], np.float32)], 1.0
    )  # no change at >= 1
    assert not overflow
