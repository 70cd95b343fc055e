"""The three conv nets of ``cnn_step.py``, built alike in minigrad and in PyTorch, with the same
weights (drawn here with NumPy) and the same batch.

    vgg      conv3x3 3->32, 32->64, 64->128 (bias, padding 1), each followed by ReLU and 2x2 max
             pooling; Dense 2048->10. Batch 64 of 3x32x32.
    resnet8  conv3x3 3->16 + BatchNorm + ReLU, then three stages of one basic block each
             (16, 32, 64 channels: conv3x3 + BN + ReLU + conv3x3 + BN, plus the shortcut, then
             ReLU; stages 2 and 3 halve the size with stride 2 and a 1x1 stride-2 conv + BN
             shortcut); global average pooling; Dense 64->10. Batch 64 of 3x32x32.
    digits   the CNN of examples/train_digits.py (conv3x3 1->16, ReLU, pool, conv3x3 16->32,
             ReLU, pool, Dense 128->10). Batch 32 of 1x8x8.

Both frameworks list the parameters in the same order (``weights(name)`` gives them), so a
plain zip copies them across. Convs with BatchNorm after them have no bias, as usual.
"""
import os
import sys

import numpy

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NETS = ("vgg", "resnet8", "digits")
BATCH = {"vgg": 64, "resnet8": 64, "digits": 32}
IMAGE = {"vgg": (3, 32, 32), "resnet8": (3, 32, 32), "digits": (1, 8, 8)}
CLASSES = 10


def batch(name, seed=0):
    """(images float32 (N, C, H, W), labels int64 (N,)) of net ``name``."""
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((BATCH[name], *IMAGE[name])).astype(numpy.float32)
    return x, rng.integers(0, CLASSES, BATCH[name])


def _conv(rng, o, c, k, bias):
    fan_in = c * k * k
    w = (rng.standard_normal((o, c, k, k)) * (2.0 / fan_in) ** 0.5).astype(numpy.float32)
    return [w, numpy.zeros(o, numpy.float32)] if bias else [w]


def _dense(rng, o, i):
    w = (rng.standard_normal((o, i)) * (1.0 / i) ** 0.5).astype(numpy.float32)
    return [w, numpy.zeros(o, numpy.float32)]


def _bn(c):
    return [numpy.ones(c, numpy.float32), numpy.zeros(c, numpy.float32)]


# the residual blocks of resnet8: (in channels, out channels, stride)
BLOCKS = ((16, 16, 1), (16, 32, 2), (32, 64, 2))


def weights(name, seed=1):
    """The trainable parameters of net ``name`` in order, as float32 arrays."""
    rng = numpy.random.default_rng(seed)
    if name == "vgg":
        return (_conv(rng, 32, 3, 3, True) + _conv(rng, 64, 32, 3, True)
                + _conv(rng, 128, 64, 3, True) + _dense(rng, 10, 2048))
    if name == "digits":
        return _conv(rng, 16, 1, 3, True) + _conv(rng, 32, 16, 3, True) + _dense(rng, 10, 128)
    out = _conv(rng, 16, 3, 3, False) + _bn(16)
    for c, o, stride in BLOCKS:
        out += _conv(rng, o, c, 3, False) + _bn(o) + _conv(rng, o, o, 3, False) + _bn(o)
        if stride != 1:
            out += _conv(rng, o, c, 1, False) + _bn(o)
    return out + _dense(rng, 10, 64)


# ---- minigrad ------------------------------------------------------------------------------
def minigrad_net(name):
    """Net ``name`` as a minigrad Cell holding ``weights(name)`` (on the context's device)."""
    import minigrad
    from minigrad import nn

    def conv(c, o, k, stride=1, bias=False):
        pad = k // 2
        return nn.Conv2d(c, o, k, stride=stride, pad_mode="pad" if pad else "valid",
                         padding=pad, has_bias=bias)

    class Block(nn.Cell):
        def __init__(self, c, o, stride):
            super().__init__()
            self.conv1, self.bn1 = conv(c, o, 3, stride), nn.BatchNorm2d(o)
            self.conv2, self.bn2 = conv(o, o, 3), nn.BatchNorm2d(o)
            self.relu = nn.ReLU()
            self.shortcut = None
            if stride != 1:
                self.shortcut = nn.SequentialCell([conv(c, o, 1, stride), nn.BatchNorm2d(o)])

        def construct(self, x):
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (x if self.shortcut is None else self.shortcut(x)))

    class ResNet8(nn.Cell):
        def __init__(self):
            super().__init__()
            self.stem = nn.SequentialCell([conv(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU()])
            self.blocks = nn.SequentialCell([Block(*spec) for spec in BLOCKS])
            self.fc = nn.Dense(64, CLASSES)

        def construct(self, x):
            return self.fc(self.blocks(self.stem(x)).mean(axis=(2, 3)))

    if name == "vgg":
        layers = []
        for c, o in ((3, 32), (32, 64), (64, 128)):
            layers += [conv(c, o, 3, bias=True), nn.ReLU(), nn.MaxPool2d(2, 2)]
        net = nn.SequentialCell(layers + [nn.Flatten(), nn.Dense(2048, CLASSES)])
    elif name == "digits":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        from train_digits import CNN
        net = CNN()
    else:
        net = ResNet8()
    params = net.trainable_params()
    for p, w in zip(params, weights(name), strict=True):
        p.set_data(minigrad.Tensor(w, device=p.device))
    return net


# ---- PyTorch -------------------------------------------------------------------------------
def torch_net(torch, name):
    """Net ``name`` as a ``torch.nn.Module`` holding ``weights(name)``."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c, o, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c, o, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(o)
            self.conv2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(o)
            self.shortcut = None
            if stride != 1:
                self.shortcut = nn.Sequential(nn.Conv2d(c, o, 1, stride, bias=False),
                                              nn.BatchNorm2d(o))

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))

    class ResNet8(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                      nn.ReLU())
            self.blocks = nn.Sequential(*[Block(*spec) for spec in BLOCKS])
            self.fc = nn.Linear(64, CLASSES)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))

    if name == "vgg":
        layers = []
        for c, o in ((3, 32), (32, 64), (64, 128)):
            layers += [nn.Conv2d(c, o, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2)]
        net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(2048, CLASSES))
    elif name == "digits":
        net = nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2),
                            nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2),
                            nn.Flatten(), nn.Linear(128, CLASSES))
    else:
        net = ResNet8()
    with torch.no_grad():
        for p, w in zip(net.parameters(), weights(name), strict=True):
            p.copy_(torch.from_numpy(w))
    return net
