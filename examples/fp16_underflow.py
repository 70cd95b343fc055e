"""Why loss scaling exists: fp16 gradients below 6e-8 flush to zero, and training stalls.

A linear regression whose loss carries a small weight (1e-6, as when a loss term is
down-weighted or averaged over very many elements), trained three ways:

* fp32 (AMP level O0): the reference; converges.
* fp16 without loss scaling (O3): the gradient reaching the fp16 output, ~2e-9, is below
  fp16's smallest subnormal (2**-24 = 6e-8) and rounds to 0. No gradient, no learning.
* fp16 with dynamic loss scaling (O3 + DynamicLossScaleManager): backprop is seeded with
  2**16, the same gradient is ~1e-4 in fp16, and it is divided back in fp32 before the fp32
  master weights are updated. Converges like fp32.

    python examples/fp16_underflow.py [--steps 300] [--plot underflow.png]

The printed underflow statistics (``minigrad.amp.underflow_stats``) show the share of gradient
values that are exactly zero in fp16 at scale 1 and at the loss scale. ``--plot`` (needs
matplotlib: ``pip install minigrad[plots]``) draws where the true (fp32) weight gradients fall in
fp16's range at scale 1 and at the run's first loss scale, and the loss scale over the steps.
"""
import argparse
import os

import numpy

import minigrad
from minigrad import Tensor, nn, amp, GradOperation

LOSS_WEIGHT = 1e-6
LR = 0.2 / LOSS_WEIGHT       # compensates the loss weight so that fp32 training converges


class WeightedMSE(nn.Cell):
    def __init__(self):
        super().__init__()
        self.mse = nn.MSELoss()

    def construct(self, logits, labels):
        return self.mse(logits, labels) * LOSS_WEIGHT


def data(n=256, features=32, outputs=4, seed=0):
    rng = numpy.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype(numpy.float32)
    w = rng.standard_normal((features, outputs)).astype(numpy.float32) / numpy.sqrt(features)
    return Tensor(x), Tensor(x @ w)


def train(mode, steps=300):
    """Train with ``mode`` in {"fp32", "fp16", "fp16+scaling"}; return (losses, train network)."""
    minigrad.set_seed(0)
    net = nn.Dense(32, 4, has_bias=False)
    optimizer = nn.SGD(net.trainable_params(), learning_rate=LR)
    if mode == "fp32":
        train_net = amp.build_train_network(net, optimizer, WeightedMSE(), level="O0")
    elif mode == "fp16":
        train_net = amp.build_train_network(net, optimizer, WeightedMSE(), level="O3")
    else:
        manager = amp.DynamicLossScaleManager(init_loss_scale=2 ** 16, scale_factor=2,
                                              scale_window=100)
        train_net = amp.build_train_network(net, optimizer, WeightedMSE(), level="O3",
                                            loss_scale_manager=manager)
    x, y = data()
    losses, train_net.reports = [], []
    for _ in range(steps):
        out = train_net(x, y)
        losses.append(float((out[0] if isinstance(out, tuple) else out).asnumpy()) / LOSS_WEIGHT)
        if getattr(train_net, "last_report", None) is not None:
            train_net.reports.append(train_net.last_report)
    return losses, train_net


def gradients(train_net, scale):
    """The weight gradients of ``train_net``'s network with backprop seeded with ``scale``."""
    x, y = data()
    grads = GradOperation(get_by_list=True, sens_param=True)(train_net.network, train_net.weights)(
        x, y, Tensor(numpy.float32(scale)))
    return {p.name: g for p, g in zip(train_net.weights, grads)}


def gradient_zero_share(train_net, scale):
    """Share of the fp16 weight-gradient values that are exactly 0 when backprop is seeded with
    ``scale``."""
    grads = gradients(train_net, scale)
    stats = amp.underflow_stats(list(grads), [g.data for g in grads.values()])
    return stats[next(iter(grads))]["zero"]


def plot(path, scaled_net):
    """Save the two pictures of ``minigrad.amp.plots`` for this run to ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from minigrad.amp import plots

    true_grads = gradients(train("fp32", steps=0)[1], 1.0)  # fp32, at the initial weights
    scale = scaled_net.reports[0].scale_before
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), constrained_layout=True)
    plots.plot_gradient_exponents(true_grads, 1.0, ax=top, label="no loss scaling")
    plots.plot_gradient_exponents(true_grads, scale, ax=top, label=f"loss scale {scale:g}")
    top.set_title("the first step's true (fp32) weight gradients, against fp16's range")
    plots.plot_scale_trajectory(scaled_net.reports, ax=bottom)
    bottom.set_title("dynamic loss scale")
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    parser.add_argument("--steps", type=positive_int, default=300)
    parser.add_argument("--plot", metavar="PATH",
                        help="save the gradient-exponent and loss-scale plots here")
    args = parser.parse_args(argv)
    if args.plot:  # check before training, not after three runs
        folder = os.path.dirname(os.path.abspath(args.plot))
        if not os.path.isdir(folder):
            parser.error(f"argument --plot: the folder {folder!r} of {args.plot!r} does not exist")
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error('argument --plot needs matplotlib: pip install ".[plots]"')
    results = {mode: train(mode, args.steps) for mode in ("fp32", "fp16", "fp16+scaling")}
    print(f"{'mode':14s} {'first loss':>12s} {'last loss':>12s}")
    for mode, (losses, _) in results.items():
        print(f"{mode:14s} {losses[0]:12.5f} {losses[-1]:12.5f}")
    scaled_net = results["fp16+scaling"][1]
    print(f"fp16 weight-gradient values that are 0: at scale 1: "
          f"{gradient_zero_share(scaled_net, 1.0):.0%}, "
          f"at scale 2**16: {gradient_zero_share(scaled_net, 2.0 ** 16):.0%}")
    print("last step:", scaled_net.last_report)
    if args.plot:
        plot(args.plot, scaled_net)
        print("plots saved to", args.plot)


if __name__ == "__main__":
    main()
