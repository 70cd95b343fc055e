# %% [markdown]
# # Lesson 8 — THOR vs Momentum
#
# THOR (Trace-based Hardware-driven layer-ORiented natural gradient, Chen et al., AAAI 2021)
# preconditions each layer's gradient with the inverses of two small Kronecker factors,
# A = E[a aᵀ] of the layer's inputs and G = E[D Dᵀ] of the gradients at its output:
# `g̃ = G⁻¹ · g · A⁻¹`. Inverting them is costly, so THOR refreshes them only every `frequency`
# steps and reuses the stored inverses in between. This lesson trains the same MLP on the
# digits with Momentum and with `nn.thor`, draws both loss curves against steps and against
# seconds, counts steps and seconds to a target loss, and shows from THOR's step report
# (`optimizer.last_report`) which layers refreshed when: every `frequency` steps (MindSpore's
# rule), or, with the THOR paper's trace rule, only when a layer's curvature has moved.
# Its last part sets the curvature THOR uses, the Kronecker-factored empirical Fisher, beside
# the exact Hessian (through Hessian-vector products) on small networks: where it is close,
# and where it is not.
#
#     python lessons/08_thor_vs_momentum.py [--out FOLDER] [--quick]

# %%
"""Lesson 8: THOR vs Momentum on the same model: loss curves, time to target, refresh steps,
and THOR's curvature next to the Hessian."""
import json
import sys
import time

import common
import numpy

import minigrad
from minigrad import Tensor, backend, nn, ops
from minigrad.autograd import grad
from minigrad.dataset import load_digits
from minigrad.thor.blocks import CurvatureBlock

args = common.parse_args(__doc__)
if not hasattr(nn, "thor"):
    print("lesson 8 needs THOR (minigrad.nn.thor), which this minigrad does not have yet: "
          "nothing to show")
    sys.exit(0)
plt = common.pyplot()

# %% [markdown]
# ## The same model, data and step count for both
# A 64-128-128-10 MLP, batches of 64 digits in the same order, three optimizers:
# Momentum; THOR refreshing every `FREQUENCY` steps; THOR with the trace rule
# (`refresh="trace"`): a layer refreshes when tr(A)·tr(G) has moved by more than
# `omega1` = 10 % since its last refresh.

# %%
STEPS = 60 if args.quick else 300
FREQUENCY = 10 if args.quick else 20
TARGET = 0.1          # training loss (running mean over 10 steps) counted as "reached"
(x_train, y_train), (x_test, y_test) = load_digits(split=0.2, seed=0)
order = numpy.random.default_rng(0).permutation(len(x_train))
BATCHES = [(Tensor(x_train[order[i:i + 64]]), Tensor(y_train[order[i:i + 64]]))
           for i in (64 * step % (len(x_train) - 64) for step in range(STEPS))]


def network():
    minigrad.set_seed(0)
    init = "he_uniform"
    return nn.SequentialCell([nn.Dense(64, 128, weight_init=init), nn.ReLU(),
                              nn.Dense(128, 128, weight_init=init), nn.ReLU(),
                              nn.Dense(128, 10, weight_init=init)])


def train(net, optimizer):
    """Train for STEPS steps; return per-step losses, cumulative seconds and THOR reports."""
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step_cell = nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), optimizer)
    losses, seconds, reports = [], [], []
    start = time.perf_counter()
    for x, y in BATCHES:
        losses.append(float(step_cell(x, y).asnumpy()))
        seconds.append(time.perf_counter() - start)
        reports.append(getattr(optimizer, "last_report", None))
    correct = (net(Tensor(x_test)).asnumpy().argmax(axis=1) == y_test).mean()
    return numpy.array(losses), numpy.array(seconds), reports, correct


momentum_net = network()
momentum = train(momentum_net, nn.Momentum(momentum_net.trainable_params(), learning_rate=0.05,
                                           momentum=0.9))
THOR_SETTINGS = {"THOR": {"frequency": FREQUENCY},
                 "THOR, trace rule": {"frequency": FREQUENCY, "refresh": "trace", "omega1": 0.1}}
results = {"Momentum": momentum}
nets = {}
for name, settings in THOR_SETTINGS.items():
    nets[name] = network()
    optimizer = nn.thor(nets[name], learning_rate=Tensor(numpy.float32(0.02)),
                        damping=Tensor(numpy.float32(0.03)), momentum=0.9, **settings)
    results[name] = train(nets[name], optimizer)

# %% [markdown]
# ## Steps and seconds to the target loss

# %%
common.heading(f"{STEPS} steps each; target: running-mean training loss below {TARGET}")


def smoothed(losses, width=10):
    """Each step's running mean: its loss and those of up to ``width - 1`` steps before it."""
    total = numpy.concatenate([[0.0], numpy.cumsum(losses)])
    end = numpy.arange(1, losses.size + 1)
    start = numpy.maximum(end - width, 0)
    return (total[end] - total[start]) / (end - start)


print(f"{'optimizer':16s} {'steps to target':>15s} {'seconds to target':>17s} "
      f"{'final loss':>10s} {'test acc':>8s} {'ms / step':>9s} {'layer refreshes':>15s}")
reached = {}
for name, (losses, seconds, reports, correct) in results.items():
    below = numpy.flatnonzero(smoothed(losses) < TARGET)
    refreshes = "-" if reports[0] is None else str(sum(len(r.refreshed) for r in reports))
    reached[name] = int(below[0]) if below.size else None
    steps_text = f"{below[0] + 1}" if below.size else "not reached"
    seconds_text = f"{seconds[below[0]]:.2f}" if below.size else "-"
    print(f"{name:16s} {steps_text:>15s} {seconds_text:>17s} {smoothed(losses)[-1]:10.3f} "
          f"{correct:8.3f} {1e3 * seconds[-1] / STEPS:9.2f} {refreshes:>15s}")

# %% [markdown]
# ## What THOR's step report says
# `optimizer.last_report` after every step: refresh (factors and inverses recomputed) or reuse,
# per layer, with the traces of A and G, the damping and the time spent.

# %%
common.heading("THOR's step reports")
thor_reports = results["THOR"][2]
for report in thor_reports[:3] + [thor_reports[FREQUENCY]]:
    print(report.summary())
print(f"\nthe full report of step {thor_reports[FREQUENCY].step} (a refresh step):")
print(thor_reports[FREQUENCY])
for name in THOR_SETTINGS:
    print(f"{name}: refresh steps {[r.step for r in results[name][2] if r.refresh]}")
trace_reports = results["THOR, trace rule"][2]
print("\nthe trace rule's report of its second step (delta: how far each layer's tr(A)·tr(G) "
      "moved):")
print(trace_reports[1])

# %% [markdown]
# ## The picture
# Left: loss against steps; middle: against wall-clock seconds (THOR's refresh steps cost more);
# right: which layers refreshed their inverses at which step, under each rule.

# %%
fig, (by_step, by_time, refresh) = plt.subplots(1, 3, figsize=(16, 4.8), constrained_layout=True)
colors = {"Momentum": "tab:blue", "THOR": "tab:orange", "THOR, trace rule": "tab:green"}
for name, (losses, seconds, _, correct) in results.items():
    steps = numpy.arange(1, losses.size + 1)
    by_step.plot(steps, losses, color=colors[name], alpha=0.3, linewidth=1)
    by_step.plot(steps, smoothed(losses), color=colors[name], linewidth=2,
                 label=f"{name} (test accuracy {correct:.1%})")
    by_time.plot(seconds, smoothed(losses), color=colors[name], linewidth=2, label=name)
    if reached[name] is not None:
        by_step.plot(reached[name] + 1, TARGET, "o", color=colors[name], markersize=8)
        by_time.plot(seconds[reached[name]], TARGET, "o", color=colors[name], markersize=8)
for ax in (by_step, by_time):
    ax.axhline(TARGET, color="gray", linestyle=":", label=f"target loss {TARGET}")
    ax.set_yscale("log")
    ax.set_ylabel("training loss (cross-entropy, nats, log)")
    ax.legend(fontsize="small")
by_step.set_xlabel("training step (batches of 64 digits)")
by_step.set_title("loss per step (thin: each step; bold: mean of 10; dot: target)",
                  fontsize=10)
by_time.set_xlabel("wall-clock time (s)")
by_time.set_title("loss per second of training")
layer_names = list(thor_reports[0].layers)
shapes = {p.name: p.shape for p in nets["THOR"].trainable_params()}
for offset, name in zip((0.15, -0.15), THOR_SETTINGS):
    for row, layer in enumerate(layer_names):
        hits = [r.step for r in results[name][2]
                if layer in r.layers and r.layers[layer].action == "refresh"]
        refresh.plot(hits, [row + offset] * len(hits), "|", markersize=9, markeredgewidth=2,
                     color=colors[name], label=f"{name}: refreshed" if row == 0 else None)
refresh.set_yticks(range(len(layer_names)),
                   [f"{name}\n{shapes[name][1]} -> {shapes[name][0]}" for name in layer_names])
refresh.set_ylim(-0.7, len(layer_names) - 0.1)
refresh.set_xlim(-1, STEPS + 1)
refresh.set_xlabel("THOR step (optimizer.last_report.step, from 1)")
refresh.set_title("inverse refreshes per layer (reused in between)", fontsize=10)
refresh.legend(fontsize="small", loc="upper right")
fig.suptitle("THOR vs Momentum on the same MLP and batches")
common.save(fig, args.out, "thor_vs_momentum.png")

# %% [markdown]
# ## What THOR's curvature is, next to the Hessian
# THOR's step is a Newton-like step with the Hessian H of the loss replaced by a cheaper
# curvature matrix. How close is that matrix to H? Here we measure it on small networks, by
# multiplying both with the same directions v.
#
# For a mean loss L = (1/N) Σₙ ℓ(f(xₙ; w), yₙ) with network output f, the chain rule gives the
# Hessian in two parts:
#
# - H = Jᵀ H_out J + (1/N) Σₙ Σⱼ (∂ℓₙ/∂fⱼ) ∇²fⱼ, with J the Jacobian of the outputs in the
#   weights and H_out the Hessian of ℓ in the outputs. The first part is the **Gauss-Newton**
#   matrix GN; the second part is weighted by the residuals ∂ℓ/∂f and holds the curvature of
#   the network itself. For the squared loss and for softmax cross-entropy, GN equals the
#   **true Fisher** E_{ŷ ~ model}[g gᵀ], where the labels ŷ are drawn from the model's own
#   output distribution. GN is positive semi-definite. H need not be.
# - The **empirical Fisher** F = (1/N) Σₙ gₙ gₙᵀ uses the per-sample gradients gₙ on the
#   *true* labels. It equals the true Fisher only when the true labels scatter around the
#   model's outputs exactly as the model's own distribution says they should.
# - THOR (with its default `fisher="empirical"`, as MindSpore's) stores F for each layer as
#   two small factors, K-FAC's approximation. A Dense layer's sample gradient is gₙ = δₙ aₙᵀ,
#   the outer product of the output gradient δₙ and the input aₙ. So its block of
#   F = (1/N) Σ (a aᵀ) ⊗ (δ δᵀ), which THOR replaces by A ⊗ G with A = (1/N) Σ a aᵀ and
#   G = (1/N) Σ δ δᵀ. It also drops every block between two layers. Applying A ⊗ G to a
#   direction V (shaped like the weight) costs two small products: G · V · A.
#
# The cells below compute four products for the same directions: H v, exactly, as the
# gradient of ⟨∇L, v⟩ with `create_graph=True`; GN v as Jᵀ (H_out (J v)), with autograd for
# each of the three products; F v, exactly, from per-sample gradients; and THOR's (A ⊗ G) v,
# with A and G formed by THOR's own code (`DenseThor` records its rows, and
# `CurvatureBlock.factors_from` turns them into factors, as a refresh step does). All of it
# runs in float64, with the two losses written out in `ops` (minigrad's loss Cells compute in
# float32, as mixed precision wants). None of it is damped: THOR's damping is a separate
# choice made when the factors are inverted.

# %%
CURVATURE_SAMPLES = 256 if args.quick else 1024
DIRECTIONS = 8 if args.quick else 32
POWER_STEPS = 40 if args.quick else 150
curvature_rng = numpy.random.default_rng(1)


def squared_error(outputs, targets):
    """``nn.MSELoss()``'s mean of (x - y)², in the outputs' dtype."""
    diff = outputs - targets
    return (diff * diff).mean()


def cross_entropy(logits, one_hot):
    """``nn.SoftmaxCrossEntropyWithLogits``'s mean of -log pᵧ, in the logits' dtype (labels as
    one-hot rows)."""
    return -(ops.log_softmax(logits, axis=1) * one_hot).sum(axis=1).mean()


def hessian_times(loss, params, vs):
    """H v: the gradient of ⟨∇L, v⟩, the first gradient taken with ``create_graph=True``."""
    grads = grad(loss, params, create_graph=True)
    return [h.asnumpy() for h in grad(sum((g * v).sum() for g, v in zip(grads, vs)), params)]


def gauss_newton_times(outputs, loss_of, params, vs):
    """Jᵀ H_out J v: J v by the double-vjp trick (u ↦ Jᵀu is linear in u), H_out (J v) as a
    Hessian-vector product of the loss in the outputs, then Jᵀ by one more backward."""
    u = Tensor(numpy.zeros(outputs.shape), requires_grad=True)
    jtu = grad(outputs, params, grad_outputs=u, create_graph=True)
    (jv,) = grad(sum((a * v).sum() for a, v in zip(jtu, vs)), [u], retain_graph=True)
    out = Tensor(outputs.asnumpy(), requires_grad=True)
    (g_out,) = grad(loss_of(out), [out], create_graph=True)
    (h_jv,) = grad((g_out * jv).sum(), [out])
    return [g.asnumpy() for g in grad(outputs, params, grad_outputs=h_jv)]


def empirical_fisher_times(layers, vs):
    """(1/N) Σₙ gₙ ⟨gₙ, v⟩ exactly, from THOR's records: sample n's gradient of a Dense weight
    is δₙ aₙᵀ, and the recorded output-gradient rows are δₙ / N for a mean loss."""
    n = layers[0].thor_pending["batch"]
    deltas = [backend.as_numpy(layer.thor_pending["g_rows"]) * n for layer in layers]
    rows = [backend.as_numpy(layer.thor_pending["a_rows"]) for layer in layers]
    dots = sum(((d @ v) * a).sum(axis=1) for d, a, v in zip(deltas, rows, vs))  # ⟨gₙ, v⟩
    return [(d * dots[:, None]).T @ a / n for d, a in zip(deltas, rows)]


def flat(parts):
    return numpy.concatenate([part.ravel() for part in parts])


def curvature_products(net, layers, loss_fn, x, y, directions):
    """For each direction v (a list of per-layer arrays): H v, GN v, F v and THOR's (A ⊗ G) v,
    as flat vectors, on the batch (x, y). The factors come from one recorded forward and
    backward pass, as on a THOR refresh step (loss scale 1, mean loss)."""
    params = [layer.weight for layer in layers]
    for layer in layers:
        layer.thor_record = "factors"
    loss_fn(net(x), y).backward()
    factors = [CurvatureBlock(layer, "weight", layer.weight.shape[0])
               .factors_from(layer.thor_pending, scale=1.0, mean=True) for layer in layers]
    for layer in layers:
        layer.thor_record = None
        layer.weight.grad = None
    products = []
    for v in directions:
        vs = [Tensor(part) for part in v]
        products.append({
            "H": flat(hessian_times(loss_fn(net(x), y), params, vs)),
            "GN": flat(gauss_newton_times(net(x), lambda out: loss_fn(out, y), params, vs)),
            "F": flat(empirical_fisher_times(layers, v)),
            "A⊗G": flat([backend.as_numpy(g) @ part @ backend.as_numpy(a)
                         for (a, g), part in zip(factors, v)]),
        })
    return products


def cosine(a, b):
    return float(a @ b / (numpy.linalg.norm(a) * numpy.linalg.norm(b)))


def relative_error(reference, other):
    return float(numpy.linalg.norm(other - reference) / numpy.linalg.norm(reference))


def unit_directions(shapes, count):
    """``count`` random directions of unit length over the weights of the given shapes."""
    directions = []
    for _ in range(count):
        parts = [curvature_rng.standard_normal(shape) for shape in shapes]
        norm = numpy.linalg.norm(flat(parts))
        directions.append([part / norm for part in parts])
    return directions

# %% [markdown]
# ## Four cases: where THOR's curvature is close to H, and where it is not
# 1. **Linear regression at the least-squares fit.** A single bias-free `Dense(16, 4)` with
#    the squared loss (`MSELoss`'s mean), on targets with Gaussian noise of exactly the
#    variance the squared loss assumes (k/2 per output, for a mean over k outputs), its
#    weights set to the least-squares solution. The network is linear,
#    so ∇²f = 0 and H = GN, exactly. H_out is constant, so H = A ⊗ (2/k)·I: it *is* a Kronecker
#    product. The residuals at the fit behave like samples from the model, so E[δδᵀ] ≈ (2/k)·I
#    and THOR's A ⊗ G comes close. Only the finite sample separates them.
# 2. **The same regression, far from the fit.** The weights are moved away from the fit. H
#    does not change (it does not depend on w), but the residuals are now large and
#    systematic, so F and A ⊗ G are too large many times over, and they point in the wrong
#    directions.
# 3. **A ReLU MLP on the digits at initialization** (64-32-10, no biases, softmax
#    cross-entropy). The residual term couples the two layers and is large, because every
#    output is still wrong. The empirical Fisher measures gradients on labels that the model
#    does not yet predict, and A ⊗ G also drops the blocks between the layers.
# 4. **The same MLP after training** (its training set nearly fitted). The residuals are
#    small, so H ≈ GN again. But a sample that is fitted well has a tiny gradient (of order ε,
#    its probability of error), so its empirical Fisher is of order ε², while its true curvature
#    is of order ε. F is then far too small: this is the well-known gap between the empirical
#    and the true Fisher.

# %%
common.heading("curvature products against the Hessian H v (float64, mean over "
               f"{DIRECTIONS} random unit directions v)")
D_IN, D_OUT = 16, 4
x_lin = curvature_rng.standard_normal((CURVATURE_SAMPLES, D_IN))
w_true = curvature_rng.standard_normal((D_OUT, D_IN))
noise = numpy.sqrt(D_OUT / 2) * curvature_rng.standard_normal((CURVATURE_SAMPLES, D_OUT))
t_lin = x_lin @ w_true.T + noise
w_fit = numpy.linalg.lstsq(x_lin, t_lin, rcond=None)[0].T
linear = nn.DenseThor(D_IN, D_OUT, has_bias=False).cast_parameters(minigrad.float64)
linear_directions = unit_directions([linear.weight.shape], DIRECTIONS)

minigrad.set_seed(0)
mlp_layers = [nn.DenseThor(64, 32, has_bias=False, weight_init="he_uniform"),
              nn.DenseThor(32, 10, has_bias=False, weight_init="he_uniform")]
mlp = nn.SequentialCell([mlp_layers[0], nn.ReLU(), mlp_layers[1]])
mlp.cast_parameters(minigrad.float64)
mlp_initial = [layer.weight.asnumpy().copy() for layer in mlp_layers]
x_digits = Tensor(x_train[:CURVATURE_SAMPLES].astype(numpy.float64))
y_digits = Tensor(numpy.eye(10)[y_train[:CURVATURE_SAMPLES]])
mlp_directions = unit_directions([layer.weight.shape for layer in mlp_layers], DIRECTIONS)


def train_mlp(steps):
    loss_cell = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step_cell = nn.TrainOneStepCell(nn.WithLossCell(mlp, loss_cell),
                                    nn.Momentum(mlp.trainable_params(), 0.1, 0.9))
    labels = Tensor(y_train[:CURVATURE_SAMPLES])
    for _ in range(steps):
        loss = step_cell(x_digits, labels)
    return float(loss.asnumpy())


CASES = {
    "linear regression, at the fit": (
        lambda: linear.weight.set_data(Tensor(w_fit)), linear, [linear], squared_error,
        (Tensor(x_lin), Tensor(t_lin)), linear_directions),
    "linear regression, far from it": (
        lambda: linear.weight.set_data(Tensor(w_fit + curvature_rng.standard_normal(w_fit.shape))),
        linear, [linear], squared_error, (Tensor(x_lin), Tensor(t_lin)), linear_directions),
    "ReLU MLP, at initialization": (
        lambda: None, mlp, mlp_layers, cross_entropy, (x_digits, y_digits), mlp_directions),
    "ReLU MLP, trained": (
        lambda: print(f"(MLP trained to loss {train_mlp(200):.4f} on its "
                      f"{CURVATURE_SAMPLES} digits)"),
        mlp, mlp_layers, cross_entropy, (x_digits, y_digits), mlp_directions),
}
MATRICES = ("GN", "F", "A⊗G")
curvature = {}
for case, (prepare, net, layers, loss_fn, (x, y), directions) in CASES.items():
    prepare()
    products = curvature_products(net, layers, loss_fn, x, y, directions)
    curvature[case] = {
        name: {"cosine": float(numpy.mean([cosine(p["H"], p[name]) for p in products])),
               "relative_error": float(numpy.mean([relative_error(p["H"], p[name])
                                                   for p in products])),
               "ratio": float(numpy.mean([(flat(v) @ p[name]) / (flat(v) @ p["H"])
                                          for p, v in zip(products, directions)]))}
        for name in MATRICES}
linear.weight.set_data(Tensor(w_fit))
V = linear_directions[0][0]
(hv_autograd,) = hessian_times(squared_error(linear(Tensor(x_lin)), Tensor(t_lin)),
                               [linear.weight], [Tensor(V)])
hv_formula = 2.0 / (CURVATURE_SAMPLES * D_OUT) * V @ x_lin.T @ x_lin   # H = A ⊗ (2/k)·I
closed_form = relative_error(hv_formula, hv_autograd)
print(f"linear regression: autograd's H v against (2/(N·k))·V·XᵀX: relative difference "
      f"{closed_form:.1e}")
print(f"{'case':32s} {'matrix M':>8s} {'cos(Mv, Hv)':>12s} {'|Mv-Hv|/|Hv|':>13s} "
      f"{'vᵀMv / vᵀHv':>12s}")
for case, rows in curvature.items():
    for name, row in rows.items():
        print(f"{case:32s} {name:>8s} {row['cosine']:12.6f} {row['relative_error']:13.2e} "
              f"{row['ratio']:12.3f}")

# %% [markdown]
# ## Directions of negative curvature, which no Fisher can see
# GN, F and A ⊗ G are all sums of squares, so vᵀMv ≥ 0 for every v. H has no such limit:
# away from a minimum it can curve downwards, and only its residual term can make it do so.
# Power iteration finds such a direction on the MLP at initialization, using nothing but
# Hessian-vector products. It first estimates the largest eigenvalue λ_max of H, then
# iterates with λ_max·I − H, whose top eigenvector is H's lowest one. Along the way we record
# each curvature's quadratic form vᵀMv.

# %%
common.heading(f"power iteration towards H's lowest eigenvalue (MLP at initialization, "
               f"{POWER_STEPS} Hessian-vector products per phase)")
for layer, weight in zip(mlp_layers, mlp_initial):
    layer.weight.set_data(Tensor(weight))
shapes = [layer.weight.shape for layer in mlp_layers]
sizes = [int(numpy.prod(shape)) for shape in shapes]


def split(vector):
    return [part.reshape(shape) for part, shape in
            zip(numpy.split(vector, numpy.cumsum(sizes)[:-1]), shapes)]


def h_times(vector):
    loss = cross_entropy(mlp(x_digits), y_digits)
    return flat(hessian_times(loss, [layer.weight for layer in mlp_layers],
                              [Tensor(part) for part in split(vector)]))


v = flat(unit_directions(shapes, 1)[0])
for _ in range(POWER_STEPS):          # phase 1: H's largest eigenvalue (by magnitude)
    v = h_times(v)
    v /= numpy.linalg.norm(v)
lambda_max = float(v @ h_times(v))
path = []
for _ in range(POWER_STEPS):          # phase 2: λ_max·I - H pulls v towards H's lowest eigenvalue
    v = lambda_max * v - h_times(v)
    v /= numpy.linalg.norm(v)
    path.append(split(v))
along = curvature_products(mlp, mlp_layers, cross_entropy, x_digits, y_digits, path)
forms = {name: [float(flat(u) @ p[name]) for u, p in zip(path, along)]
         for name in ("H", "GN", "F", "A⊗G")}
print(f"largest eigenvalue of H ≈ {lambda_max:.4f}")
print("at the last step: " + ", ".join(f"vᵀ{name}v = {values[-1]:+.3e}"
                                      for name, values in forms.items()))
print(f"negative curvature found: {forms['H'][-1] < 0}; every Fisher-type form >= 0: "
      f"{all(min(forms[name]) >= 0 for name in ('GN', 'F', 'A⊗G'))}")
with open(f"{args.out}/curvature_vs_hessian.json", "w", encoding="utf-8") as file:
    json.dump({"cases": curvature, "closed_form": closed_form, "lambda_max": lambda_max,
               "negative_direction": {name: values[-1] for name, values in forms.items()},
               "min_forms": {name: min(values) for name, values in forms.items()}}, file,
              indent=1)

# %% [markdown]
# ## The picture: THOR's curvature against the Hessian
# Left: the cosine between M v and H v, averaged over random directions (1 means the same
# direction). Middle: the curvature that M measures along v, as a multiple of what H
# measures (1 means the same scale; log axis). Right: the quadratic forms along the power
# iteration, as v turns towards H's lowest eigenvalue.
#
# What to read in it:
#
# - **Linear regression at the fit:** GN equals H to rounding, because the model is linear
#   and the loss is the model's own likelihood. THOR's A ⊗ G points almost where H points
#   (cosine above 0.99) and measures the same curvature to within about ten percent, a gap
#   that shrinks as the sample grows. Curiously, it is closer than the exact empirical Fisher F:
#   averaging a aᵀ and δ δᵀ separately treats residuals and inputs as independent, as the
#   model assumes they are, which averages out part of the sampling noise.
# - **Far from the fit:** H has not changed, but F and A ⊗ G have grown with the squared
#   residuals, so THOR would take steps many times too small there. Its damping and learning
#   rate absorb part of this in practice.
# - **The ReLU MLP:** at initialization even GN misses part of H (the residual term). After
#   training GN and H agree again, while F and A ⊗ G measure only a fraction of the
#   curvature: the well-fitted samples hardly contribute to an empirical Fisher.
#   (`fisher="mc"` draws the labels from the model instead, which estimates the true Fisher,
#   GN, in its Kronecker form. For case 1 its expectation A ⊗ (2/k)·I equals H exactly.)
# - **Negative curvature:** vᵀHv falls below zero while every Fisher-type form stays
#   positive. THOR's step is a descent step in every direction (which is why it is stable),
#   but it cannot use a direction in which the loss curves down.

# %%
fig, (cosines, ratios, negative) = plt.subplots(1, 3, figsize=(16, 4.8),
                                                constrained_layout=True)
matrix_colors = {"GN": "tab:blue", "F": "tab:purple", "A⊗G": "tab:orange"}
labels = {"GN": "Gauss-Newton = true Fisher", "F": "empirical Fisher (exact)",
          "A⊗G": "THOR's A ⊗ G (empirical)"}
positions = numpy.arange(len(curvature))
for i, name in enumerate(MATRICES):
    offsets = positions + (i - 1) * 0.27
    cosines.bar(offsets, [rows[name]["cosine"] for rows in curvature.values()], 0.27,
                color=matrix_colors[name], label=labels[name])
    ratios.bar(offsets, [rows[name]["ratio"] for rows in curvature.values()], 0.27,
               color=matrix_colors[name], label=labels[name])
for ax in (cosines, ratios):
    ax.set_xticks(positions, [case.replace(", ", ",\n") for case in curvature], fontsize=8)
cosines.axhline(1.0, color="gray", linestyle=":")
cosines.set_ylim(0, 1.05)
cosines.set_ylabel("cos(M v, H v), mean over random directions")
cosines.set_title("direction: does M v point where H v points?", fontsize=10)
cosines.legend(fontsize="small", loc="lower left")
ratios.axhline(1.0, color="gray", linestyle=":", label="same curvature as H")
ratios.set_yscale("log")
ratios.set_ylabel("vᵀMv / vᵀHv (log)")
ratios.set_title("scale: how much curvature M sees along v", fontsize=10)
ratios.legend(fontsize="small", loc="upper right")
steps = numpy.arange(1, POWER_STEPS + 1)
negative.plot(steps, forms["H"], color="black", linewidth=2, label="vᵀHv (Hessian)")
for name in MATRICES:
    negative.plot(steps, forms[name], color=matrix_colors[name], label=f"vᵀMv, {labels[name]}")
negative.axhline(0.0, color="gray", linestyle=":")
negative.set_xlabel("power-iteration step with λ_max·I − H (v of unit length)")
negative.set_ylabel("curvature along v")
negative.set_title("towards H's lowest eigenvalue (MLP at initialization)", fontsize=10)
negative.legend(fontsize="small")
fig.suptitle(f"THOR's curvature next to the Hessian ({CURVATURE_SAMPLES} samples, float64)")
common.save(fig, args.out, "thor_curvature_vs_hessian.png")
