"""Train an MLP and a small CNN on handwritten digits (or CIFAR-10) with ``minigrad.Model``.

    python examples/train_digits.py                      # both models, fp32, a few seconds each
    python examples/train_digits.py --model cnn --epochs 20
    python examples/train_digits.py --amp-level O2       # fp16 with dynamic loss scaling
    python examples/train_digits.py --fp8 delayed        # Dense/Conv2d GEMMs in FP8 (HYBRID)
    python examples/train_digits.py --amp-level O2 --dtype bfloat16   # bf16, no loss scaling
    python examples/train_digits.py --mnist DIR          # MNIST's IDX files (plain or .gz)
    python examples/train_digits.py --cifar10 DIR --model cnn   # CIFAR-10's binary batches

By default the data are scikit-learn's digits (1797 images of 8x8 pixels, shipped inside
scikit-learn: ``pip install minigrad[datasets]``). ``--mnist`` reads ``dataset.MnistDataset``
from a folder of MNIST's four files; ``--cifar10`` reads ``dataset.Cifar10Dataset`` from a folder
of its binary batches and trains with random crops and flips. The progress bar uses tqdm when it
is installed (``pip install minigrad[progress]``). ``--fp8 delayed|current|tensorwise`` runs the
network's Dense and Conv2d GEMMs in FP8 under Transformer Engine's delayed or current scaling or
torchao's tensorwise scaling (E4M3 forward, E5M2 gradients) and prints each FP8 tensor's last
amax, scale, clipped and flushed shares and SQNR; on a CPU this is slower than fp32, never faster.
``--dtype bfloat16`` (the ``minigrad[lowp]`` extra) runs the amp level in bfloat16 instead of
float16: no loss scaling by default, as bf16 has float32's exponent range.
"""
import argparse
import time

import minigrad
from minigrad import fp8, nn
from minigrad.dataset import Cifar10Dataset, MnistDataset, NumpySlicesDataset, load_digits, vision
from minigrad.optim import Momentum, cosine_decay_lr
from minigrad.train import Accuracy, Loss, LossMonitor, LossScaleMonitor, ProgressBar


# He initialisation for the ReLU layers, with zero biases (the defaults are MindSpore 2.x's:
# HeUniform(negative_slope=√5) weights and uniform biases)
HE = dict(weight_init="he_uniform", bias_init="zeros")


class MLP(nn.Cell):
    """pixels (flattened) -> 256 hidden (ReLU, dropout 0.2) -> 10 logits."""

    def __init__(self, in_features=64):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Dense(in_features, 256, **HE)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(p=0.2)
        self.fc2 = nn.Dense(256, 10, **HE)

    def construct(self, x):
        return self.fc2(self.dropout(self.relu(self.fc1(self.flatten(x)))))


class CNN(nn.Cell):
    """(C, S, S) -> conv 3x3 x16 -> pool -> conv 3x3 x32 -> pool -> dense 10."""

    def __init__(self, channels=1, size=8):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, pad_mode="same", has_bias=True, **HE)
        self.conv2 = nn.Conv2d(16, 32, 3, pad_mode="same", has_bias=True, **HE)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.relu = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(32 * (size // 4) ** 2, 10, **HE)

    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return self.fc(self.flatten(x))


class FP8Network(nn.Cell):
    """``net`` with its Dense and Conv2d GEMMs in FP8 under ``recipe`` (``fp8.fp8_autocast``
    around the forward pass; the backward casts follow the forward's)."""

    def __init__(self, net, recipe):
        super().__init__()
        self.net = net
        self.recipe = recipe

    def construct(self, x):
        with fp8.fp8_autocast(fp8_recipe=self.recipe):
            return self.net(x)


FP8_RECIPES = {"delayed": fp8.DelayedScaling, "current": fp8.CurrentScaling,
               "tensorwise": fp8.TensorwiseScaling}

# network class, peak learning rate, weight decay
MODELS = {"mlp": (MLP, 0.1, 0.0), "cnn": (CNN, 0.05, 1e-4)}
# data set -> (image shape (C, H, W), default epochs of the mlp and the cnn)
DATASETS = {"digits": ((1, 8, 8), {"mlp": 20, "cnn": 12}),
            "MNIST": ((1, 28, 28), {"mlp": 3, "cnn": 2}),
            "CIFAR-10": ((3, 32, 32), {"mlp": 10, "cnn": 10})}
_MNIST_MEAN, _MNIST_STD = [0.1307], [0.3081]
_CIFAR_MEAN, _CIFAR_STD = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]


def load(mnist=None, cifar10=None, batch_size=32, seed=0, flatten=False):
    """``(name, train dataset, test dataset, test images)``: batches of ("image", "label"),
    images NCHW (rows of pixels for the digits' MLP, ``flatten``)."""
    if mnist is not None and cifar10 is not None:
        raise ValueError("give mnist or cifar10, not both")
    if mnist is None and cifar10 is None:
        (x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=seed, flatten=flatten)
        train = NumpySlicesDataset({"image": x_train, "label": y_train}, shuffle=True)
        test = NumpySlicesDataset({"image": x_test, "label": y_test}, shuffle=False)
        return "digits", train.batch(batch_size), test.batch(256), len(y_test)
    if mnist is not None:
        name, source, mean, std, augment = "MNIST", MnistDataset, _MNIST_MEAN, _MNIST_STD, []
        folder = mnist
    else:
        name, source, mean, std = "CIFAR-10", Cifar10Dataset, _CIFAR_MEAN, _CIFAR_STD
        augment = [vision.RandomCrop(32, padding=4), vision.RandomHorizontalFlip()]
        folder = cifar10
    to_tensor = [vision.Rescale(1 / 255, 0), vision.Normalize(mean, std), vision.HWC2CHW()]
    train = source(folder, usage="train", shuffle=True).map(augment + to_tensor, "image")
    test = source(folder, usage="test", shuffle=False).map(to_tensor, "image")
    return name, train.batch(batch_size), test.batch(256), test.get_dataset_size()


def run(name, epochs=None, amp_level="O0", batch_size=32, seed=0, progress=True, verbose=True,
        mnist=None, cifar10=None, fp8_recipe=None, dtype="float16"):
    """Train model ``name`` ("mlp" or "cnn") on the digits, or on MNIST / CIFAR-10 read from the
    folder given as ``mnist`` / ``cifar10``, and return its test accuracy. ``fp8_recipe``: None,
    or "delayed", "current" or "tensorwise" (``FP8_RECIPES``) for FP8 GEMMs. ``dtype``: the amp
    level's low-precision dtype, "float16" or "bfloat16" (no loss scaling by default)."""
    cls, lr, weight_decay = MODELS[name]
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int)
                               or epochs < 1):
        raise ValueError(f"run: 'epochs' must be a positive int or None (the model's default), "
                         f"got {epochs!r}")
    minigrad.set_seed(seed)
    data, train_ds, test_ds, tested = load(mnist, cifar10, batch_size, seed,
                                           flatten=name == "mlp")
    (channels, height, width), default_epochs = DATASETS[data]
    epochs = default_epochs[name] if epochs is None else epochs
    net = MLP(channels * height * width) if name == "mlp" else CNN(channels, height)
    if fp8_recipe is not None:
        net = FP8Network(net, FP8_RECIPES[fp8_recipe]())
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    steps = train_ds.get_dataset_size()
    schedule = cosine_decay_lr(0.0, lr, steps * epochs, steps, epochs)  # one value per step
    optimizer = Momentum(net.trainable_params(), schedule, momentum=0.9, weight_decay=weight_decay)
    model = minigrad.Model(net, loss_fn, optimizer,
                           metrics={"accuracy": Accuracy(), "loss": Loss()}, amp_level=amp_level,
                           dtype=dtype)
    scale_monitor = LossScaleMonitor()  # records nothing when the level has no loss scaling
    callbacks = [ProgressBar() if progress else LossMonitor(per_print_times=0), scale_monitor]
    start = time.perf_counter()
    model.train(epochs, train_ds, callbacks=callbacks)
    seconds = time.perf_counter() - start
    result = model.eval(test_ds)
    if verbose:
        where = "" if data == "digits" else f" on {data}"
        level = amp_level if amp_level == "O0" or dtype == "float16" else f"{amp_level}, {dtype}"
        precision = level if fp8_recipe is None else f"{level}, FP8 {fp8_recipe}"
        print(f"{name} ({precision}){where}: test accuracy {result['accuracy']:.4f}, test loss "
              f"{result['loss']:.4f}, {tested} test images, trained in {seconds:.1f} s",
              flush=True)
        if scale_monitor.scales:
            print(f"  loss scale {scale_monitor.scales[0]:.0f} -> {scale_monitor.scales[-1]:.0f}; "
                  f"{sum(scale_monitor.overflows)} of {len(scale_monitor.overflows)} steps skipped "
                  f"on {'fp16' if dtype == 'float16' else 'bf16'} gradient overflow", flush=True)
        if fp8_recipe is not None:
            print(fp8.format_report(fp8.tensor_report(net)), flush=True)
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
                        help="default: 20 (mlp), 12 (cnn) on the digits; 3, 2 on MNIST; 10 on "
                             "CIFAR-10")
    parser.add_argument("--amp-level", default="O0", choices=["O0", "O1", "O2", "O3"],
                        help="O2: fp16 network with dynamic loss scaling")
    parser.add_argument("--fp8", choices=sorted(FP8_RECIPES), default=None,
                        help="Dense/Conv2d GEMMs in FP8 (HYBRID) under this scaling recipe")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"],
                        help="the amp level's low-precision dtype (bfloat16: no loss scaling)")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", type=str.upper, choices=["CPU", "GPU"], default="CPU",
                        help="GPU: train with CuPy (one host read per loss-scaled step)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--mnist", metavar="DIR", help="train on MNIST's IDX files in DIR")
    source.add_argument("--cifar10", metavar="DIR",
                        help="train on CIFAR-10's binary batches in DIR")
    args = parser.parse_args(argv)
    minigrad.set_context(device_target=args.device)
    names = ["mlp", "cnn"] if args.model == "both" else [args.model]
    return {name: run(name, args.epochs, args.amp_level, args.batch_size, args.seed,
                      progress=not args.no_progress, mnist=args.mnist, cifar10=args.cifar10,
                      fp8_recipe=args.fp8, dtype=args.dtype)
            for name in names}


if __name__ == "__main__":
    main()
