"""The float status object of one step (``amp.float_status.OverflowStatus``) copies itself."""
import copy
import numpy as np


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
