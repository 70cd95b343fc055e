"""Train an MLP and a small CNN on scikit-learn's handwritten digits with ``minigrad.Model``.

    python examples/train_digits.py                      # both models, fp32, a few seconds each
    python examples/train_digits.py --model cnn --epochs 20
    python examples/train_digits.py --amp-level O2       # fp16 with dynamic loss scaling

The digits (1797 images of 8x8 pixels) ship inside scikit-learn
(``pip install minigrad[datasets]``); the progress bar uses tqdm when it is installed
(``pip install minigrad[progress]``).
"""
import argparse
import time

import minigrad
from minigrad import nn
from minigrad.dataset import NumpySlicesDataset, load_digits
from minigrad.optim import Momentum, cosine_decay_lr
from minigrad.train import Accuracy, Loss, LossMonitor, LossScaleMonitor, ProgressBar


# He initialisation for the ReLU layers, with zero biases (the defaults are MindSpore 2.x's:
# HeUniform(negative_slope=√5) weights and uniform biases)
HE = dict(weight_init="he_uniform", bias_init="zeros")


class MLP(nn.Cell):
    """64 pixels -> 256 hidden (ReLU, dropout 0.2) -> 10 logits."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(64, 256, **HE)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(p=0.2)
        self.fc2 = nn.Dense(256, 10, **HE)

    def construct(self, x):
        return self.fc2(self.dropout(self.relu(self.fc1(x))))


class CNN(nn.Cell):
    """(1, 8, 8) -> conv 3x3 x16 -> pool -> conv 3x3 x32 -> pool -> dense 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, pad_mode="same", has_bias=True, **HE)
        self.conv2 = nn.Conv2d(16, 32, 3, pad_mode="same", has_bias=True, **HE)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(32 * 2 * 2, 10, **HE)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc(self.flatten(x))


# network class, flat images?, default epochs, peak learning rate, weight decay
MODELS = {"mlp": (MLP, True, 20, 0.1, 0.0), "cnn": (CNN, False, 12, 0.05, 1e-4)}


def run(name, epochs=None, amp_level="O0", batch_size=32, seed=0, progress=True, verbose=True):
    """Train model ``name`` ("mlp" or "cnn") and return its test accuracy."""
    cls, flatten, default_epochs, lr, weight_decay = MODELS[name]
    epochs = default_epochs if epochs is None else epochs
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"run: 'epochs' must be a positive int or None (the model's default), "
                         f"got {epochs!r}")
    minigrad.set_seed(seed)
    (x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=seed, flatten=flatten)
    train_ds = NumpySlicesDataset({"image": x_train, "label": y_train}, shuffle=True)
    train_ds = train_ds.batch(batch_size)
    test_ds = NumpySlicesDataset({"image": x_test, "label": y_test}, shuffle=False).batch(256)

    net = cls()
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    steps = train_ds.get_dataset_size()
    schedule = cosine_decay_lr(0.0, lr, steps * epochs, steps, epochs)  # one value per step
    optimizer = Momentum(net.trainable_params(), schedule, momentum=0.9, weight_decay=weight_decay)
    model = minigrad.Model(net, loss_fn, optimizer,
                           metrics={"accuracy": Accuracy(), "loss": Loss()}, amp_level=amp_level)
    scale_monitor = LossScaleMonitor()  # records nothing when the level has no loss scaling
    callbacks = [ProgressBar() if progress else LossMonitor(per_print_times=0), scale_monitor]
    start = time.perf_counter()
    model.train(epochs, train_ds, callbacks=callbacks)
    seconds = time.perf_counter() - start
    result = model.eval(test_ds)
    if verbose:
        print(f"{name} ({amp_level}): test accuracy {result['accuracy']:.4f}, test loss "
              f"{result['loss']:.4f}, {len(y_test)} test images, trained in {seconds:.1f} s",
              flush=True)
        if scale_monitor.scales:
            print(f"  loss scale {scale_monitor.scales[0]:.0f} -> {scale_monitor.scales[-1]:.0f}; "
                  f"{sum(scale_monitor.overflows)} of {len(scale_monitor.overflows)} steps skipped "
                  f"on fp16 gradient overflow", flush=True)
    return result["accuracy"]


def positive_int(text):
    """argparse type: an int >= 1 (the error names the value; argparse adds the flag)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    parser.add_argument("--epochs", type=positive_int, default=None,
                        help="default: 20 (mlp), 12 (cnn)")
    parser.add_argument("--amp-level", default="O0", choices=["O0", "O1", "O2", "O3"],
                        help="O2: fp16 network with dynamic loss scaling")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", type=str.upper, choices=["CPU", "GPU"], default="CPU",
                        help="GPU: train with CuPy (one host read per loss-scaled step)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    minigrad.set_context(device_target=args.device)
    names = ["mlp", "cnn"] if args.model == "both" else [args.model]
    return {name: run(name, args.epochs, args.amp_level, args.batch_size, args.seed,
                      progress=not args.no_progress) for name in names}


if __name__ == "__main__":
    main()
