"""General transforms with MindSpore's names (``mindspore.dataset.transforms``): ``TypeCast``."""
import numpy

from minigrad import dtype as dtypes


class TypeCast:
    """Cast a column's values to ``data_type`` (a minigrad/NumPy dtype, e.g.
    ``TypeCast(mstype.int32)`` for labels).

    Raises:
        TypeError: ``data_type`` is not a dtype minigrad supports.
    """

    def __init__(self, data_type):
        self.data_type = dtypes.as_dtype(data_type, "data_type")

    def __call__(self, value):
        return numpy.asarray(value).astype(self.data_type)
