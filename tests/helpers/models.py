"""Networks the AMP tests share: a Dense-ReLU-Dense classifier of 8 features into 3 classes and
its mean sparse cross-entropy; MindSpore's LeNet5, which its tutorials and docstrings use."""
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


class LeNet5(nn.Cell):
    """MindSpore 2.x's LeNet5 (docs/mindspore/code/lenet.py): default initializers."""

    def __init__(self, num_class=10, num_channel=1):
        super(LeNet5, self).__init__()
        self.conv1 = nn.Conv2d(num_channel, 6, 5, pad_mode='valid')
        self.conv2 = nn.Conv2d(6, 16, 5, pad_mode='valid')
        self.fc1 = nn.Dense(16 * 5 * 5, 120)
        self.fc2 = nn.Dense(120, 84)
        self.fc3 = nn.Dense(84, num_class)
        self.relu = nn.ReLU()
        self.max_pool2d = nn.MaxPool2d(kernel_size=2, stride=2)
        self.flatten = nn.Flatten()

    def construct(self, x):
        x = self.max_pool2d(self.relu(self.conv1(x)))
        x = self.max_pool2d(self.relu(self.conv2(x)))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        x = self.fc3(x)
        return x
