"""TODO docstring"""
import numpy
from minigrad import Tensor


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
