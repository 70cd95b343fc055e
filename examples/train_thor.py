"""THOR against Momentum on the digits MLP: steps and seconds to a training-loss target.

    python examples/train_thor.py                 # a few seconds on 2 cores
    python examples/train_thor.py --plot loss.png # also draw both loss curves (matplotlib)

Both optimizers start from the same weights and see the same batches. THOR refreshes its
curvature every 10 steps; its report of the last refresh is printed at the end. The digits ship
inside scikit-learn (``pip install minigrad[datasets]``).
"""
import argparse
import time

import numpy

import minigrad
from minigrad import Tensor, nn
from minigrad.dataset import load_digits


def build():
    return nn.SequentialCell([nn.Dense(64, 128, weight_init="xavier_uniform"), nn.Tanh(),
                              nn.Dense(128, 128, weight_init="xavier_uniform"), nn.Tanh(),
                              nn.Dense(128, 10, weight_init="xavier_uniform")])


def run(kind, data, args):
    (x, y), (x_test, y_test) = data
    device = minigrad.get_context("device_target")  # where the batches go (--device)
    minigrad.set_seed(args.seed)
    net = build()
    if kind == "THOR":
        opt = nn.thor(net, Tensor(numpy.float32(0.02)), Tensor(numpy.float32(0.01)), 0.9,
                      frequency=10)
    else:
        opt = nn.Momentum(net.trainable_params(), 0.4, 0.9)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), opt)
    order = numpy.random.default_rng(args.seed)
    curve, seconds, steps, reached, last_refresh = [], 0.0, 0, None, None
    while steps < args.max_steps and reached is None:
        perm = order.permutation(len(x))
        for b in range(len(x) // args.batch):
            idx = perm[b * args.batch:(b + 1) * args.batch]
            start = time.perf_counter()
            step(Tensor(x[idx], device=device), Tensor(y[idx], device=device))
            seconds += time.perf_counter() - start
            steps += 1
            if kind == "THOR" and opt.last_report.refresh:
                last_refresh = opt.last_report
            if steps % 10 == 0:
                with minigrad.no_grad():
                    loss = loss_fn(net(Tensor(x, device=device)), Tensor(y, device=device))
                    loss = float(loss.asnumpy())
                curve.append((steps, loss))
                if loss <= args.target:
                    reached = steps
                    break
            if steps >= args.max_steps:
                break
    with minigrad.no_grad():
        logits = net(Tensor(x_test, device=device)).asnumpy()
        accuracy = float((logits.argmax(1) == y_test).mean())
    return {"steps": reached, "seconds": seconds, "accuracy": accuracy, "curve": curve,
            "report": last_refresh}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", type=float, default=0.02, help="training loss to reach")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--max-steps", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", type=str.upper, choices=["CPU", "GPU"], default="CPU",
                        help="GPU: train with CuPy (one host read per loss-scaled step)")
    parser.add_argument("--plot", default=None, help="write the two loss curves to this file")
    args = parser.parse_args(argv)
    minigrad.set_context(device_target=args.device)
    data = load_digits(split=0.2, seed=0)
    results = {kind: run(kind, data, args) for kind in ("Momentum", "THOR")}
    for kind, r in results.items():
        reached = f"{r['steps']} steps" if r["steps"] else f"not within {args.max_steps} steps"
        print(f"{kind:<8}: loss <= {args.target} in {reached}, {r['seconds']:.2f} s of "
              f"training steps; test accuracy {r['accuracy']:.4f}")
    if results["THOR"]["report"] is not None:
        print("THOR's last refresh:")
        print(results["THOR"]["report"])
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for kind, r in results.items():
            steps, losses = zip(*r["curve"])
            ax.semilogy(steps, losses, label=kind)
        ax.axhline(args.target, color="gray", linestyle=":", label="target")
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"loss curves written to {args.plot}")
    return results


if __name__ == "__main__":
    main()
