"""Tiny networks the AMP tests share: a Dense-ReLU-Dense classifier of 8 features into 3 classes
and its mean sparse cross-entropy."""
from minigrad import nn


class TinyMLP(nn.Cell):
    """Dense(8, 16) -> ReLU -> Dense(16, 3): logits for 3 classes."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Dense(16, 3)

    def construct(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def cross_entropy():
    """Softmax cross-entropy on int labels, averaged over the batch."""
    return nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
