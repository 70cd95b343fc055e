"""minigrad.amp.functional: MindSpore's LossScaler classes (StaticLossScaler,
DynamicLossScaler) and their Parameters."""
import numpy as np
import pytest

from minigrad.amp import DynamicLossScaler


def test_dynamic_loss_scaler_reads_its_counter_parameter():
    """MindSpore's ``amp.DynamicLossScaler.adjust`` reads the ``counter`` Parameter
    (``select(counter == scale_window - 1, ...)``, then ``counter = ((counter + 1) %
    scale_window) * grads_finite``), as it reads ``scale_value``: a counter restored into the
    Parameter (a checkpoint, ``set_data``) is the one the next step counts from."""
    sc = DynamicLossScaler(8, 2, 3)
    sc.counter.set_data(np.int32(2))
    assert sc.adjust(True) is True
    assert float(sc.scale_value.data) == 16.0 and int(sc.counter.data) == 0
    sc.counter.set_data(np.int32(1))
    sc.adjust(True)
    assert float(sc.scale_value.data) == 16.0 and int(sc.counter.data) == 2
    sc.adjust(False)
    assert float(sc.scale_value.data) == 8.0 and int(sc.counter.data) == 0


def test_integer_arguments_refuse_numpy_floats():
    with pytest.raises(TypeError):
        DynamicLossScaler(2 ** 10, np.float64(2.5), 1)
