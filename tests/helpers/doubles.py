"""Small stand-ins shared by several test files."""
import numpy

from minigrad import nn, ops
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


class StepCountingOptimizer:
    """An optimizer double for driving GradScaler's rule: it holds ``parameters`` and counts the
    calls to ``step`` (the tests with real optimizers are in tests/amp/test_faces.py)."""

    def __init__(self, params):
        self.parameters = tuple(params)
        self.steps = 0

    def step(self):
        self.steps += 1


class MatMulNet(nn.Cell):
    """``x @ weight`` with an all-ones ``weight`` of shape (in_features, out_features): the network
    of the examples of MindSpore's ``nn.TrainOneStepWithLossScaleCell`` and
    ``FixedLossScaleManager`` API pages."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = Parameter(
            Tensor(numpy.ones([in_features, out_features]).astype(numpy.float32)), name="weight"
        )
        self.matmul = ops.MatMul()

    def construct(self, x):
        return self.matmul(x, self.weight)
