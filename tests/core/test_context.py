"""minigrad.set_context / get_context: MindSpore's keys accepted, an unknown key refused."""
import pytest

import minigrad


def test_set_context_refuses_an_unknown_key_instead_of_ignoring_it():
    # MindSpore's set_context raises ValueError for a key that is not a context attribute; a
    # misspelt device_targt="GPU" silently trained on the CPU.
    with pytest.raises(ValueError, match="device_targt"):
        minigrad.set_context(device_targt="CPU")
    with pytest.raises(ValueError, match="devcie_id"):
        minigrad.set_context(device_target="CPU", devcie_id=0)
    minigrad.set_context(mode=1, device_id=0, max_call_depth=10000, save_graphs=False,
                         device_target="CPU")  # MindSpore's own keys stay accepted
    assert minigrad.get_context("device_target") == "CPU"
