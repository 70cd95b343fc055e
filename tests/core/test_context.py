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


def test_context_arguments_are_named_with_the_value():
    before = minigrad.get_context("device_target")
    with pytest.raises(TypeError, match=r"device_target must be one of \('CPU', 'GPU'\) \(a str\), "
                                        r"got True \(bool\)"):
        minigrad.set_context(device_target=True, num_threads=None)
    with pytest.raises(ValueError, match=r"device_target must be one of \('CPU', 'GPU'\), "
                                         r"got 'TPU'"):
        minigrad.set_context(device_target="TPU")
    assert minigrad.get_context("device_target") == before  # nothing changed
    with pytest.raises(TypeError, match=r"get_context: key must be a str, got \['mode'\] \(list\)"):
        minigrad.get_context(["mode"])
    with pytest.raises(TypeError, match=r"get_auto_parallel_context: key must be a str, got "
                                        r"\['parallel_mode'\] \(list\)"):
        minigrad.get_auto_parallel_context(["parallel_mode"])
