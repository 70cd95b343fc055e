"""Review session 3j: public docstrings of amp/, mixed_precision/, nn/loss_scale.py and optim/
checked against the code."""
import numpy
import pytest

from minigrad import Parameter, Tensor
from minigrad.amp import float_status
from minigrad.optim import SGD


def _param():
    return Parameter(Tensor(numpy.ones(3, numpy.float32)), name="w")


@pytest.mark.parametrize("rate", [numpy.array([numpy.inf, 0.1]), numpy.array(numpy.inf),
                                  Tensor(numpy.array([0.1, numpy.inf], numpy.float32))])
def test_optimizer_rejects_inf_learning_rate_array(rate):
    # optim/optimizer.py Optimizer: learning_rate must be finite (a float or a list with inf is
    # refused); a Tensor/array holding inf was accepted and made every step inf/NaN
    with pytest.raises(ValueError, match="learning_rate.*inf"):
        SGD([_param()], learning_rate=rate)


def test_optimizer_rejects_inf_group_learning_rate_array():
    with pytest.raises(ValueError, match="group 0 'lr'.*inf"):
        SGD([{"params": [_param()], "lr": numpy.array([0.1, numpy.inf])}])


def test_float_status_all_finite_names_arrays_argument():
    # amp/float_status.py all_finite: "Raises TypeError / ValueError: as check_overflow",
    # whose message names arrays[i]; it named 'like' (alloc_status's argument)
    with pytest.raises(TypeError, match=r"arrays\[1\] must be a Tensor"):
        float_status.all_finite([None, 1.0])
    with pytest.raises(TypeError, match=r"arrays\[0\] must have dtype"):
        float_status.all_finite([numpy.ones(2, numpy.int32)])
    assert float_status.all_finite([None, numpy.ones(2, numpy.float32)]) is True


def test_tf_loss_scale_update_report_names_the_gradients():
    # mixed_precision/loss_scale.py LossScale.update: StepReport.inf_params / nan_params are
    # "names of the parameters"; update(grads) gave (None,) (printed "NaN in [None]")
    from minigrad import mixed_precision
    scale = mixed_precision.DynamicLossScale(8.0)
    grads = [Tensor(numpy.ones(2, numpy.float32)), None,
             Tensor(numpy.array([numpy.nan, numpy.inf], numpy.float32))]
    assert scale.update(grads) == (None, False)
    report = scale.last_report
    assert report.inf_params == ("grads[2]",) and report.nan_params == ("grads[2]",)
    assert "None" not in str(report)
