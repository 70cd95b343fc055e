"""What the FP8 casts did, per named tensor: the report table, the "what-if" table of every recipe
and format on saved tensors, and the plot of scale and amax over a run.

``tensor_report(net)`` reads the ``ScalingState`` each FP8 layer keeps (``fp8_autocast``) and
gives one row per tensor, named ``<layer>.input`` / ``.weight`` / ``.grad_output``, with the
last cast's amax, scale, share clipped to ±max, share flushed to zero and SQNR (dB).
"""
import math

from minigrad.fp8.formats import E4M3, E5M2
from minigrad.fp8.quantize import quantize
from minigrad.fp8.recipes import RECIPES, ScalingState
from minigrad.tensor import Tensor

COLUMNS = ("tensor", "recipe", "format", "amax", "scale_min", "scale_max", "clipped", "flushed",
           "sqnr_db", "casts")


def fp8_states(net):
    """``[(name, ScalingState)]`` of every FP8 tensor of the cells under ``net`` (those that
    ran under ``fp8_autocast``), in the network's order; the names follow the weights'
    parameter paths (``fc1.input``, ``fc1.weight``, ``fc1.grad_output``)."""
    found = []
    for _, cell in net.cells_and_names():
        held = cell.__dict__.get("_fp8_states")
        if held is not None:
            found.extend((state.name, state) for group in held[1].values()
                         for state in group.values())
    return found


def tensor_report(net):
    """One dict per FP8 tensor of ``net`` that has been cast (``COLUMNS``): the statistics of
    its last cast, its format and how many casts it has seen."""
    rows = []
    for name, state in fp8_states(net):
        if state.last is None:
            continue
        rows.append({"tensor": name, "format": state.fmt.name, **state.last.row(),
                     "casts": len(state.trace)})
    return rows


def format_report(rows):
    """``rows`` (dicts with ``COLUMNS``' keys, or some of them) as a fixed-width text table;
    shares as percentages, SQNR in dB."""
    if not rows:
        return "(no FP8 tensor has been cast)"
    keys = [k for k in COLUMNS if k in rows[0]]
    cells = [[_cell(k, row[k]) for k in keys] for row in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in cells]
    return "\n".join(lines)


def _cell(key, value):
    if key in ("clipped", "flushed"):
        return f"{100 * value:.3g} %"
    if key == "sqnr_db":
        return f"{value:.1f} dB" if math.isfinite(value) else str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def what_if(tensors, recipes=None, delayed_scales=None):
    """Quantize each saved tensor under every recipe and format and tabulate the errors.

    Args:
        tensors: a dict ``{name: array}`` (NumPy or CuPy arrays, or Tensors).
        recipes: names of ``RECIPES`` to try (default all: delayed, current, tensorwise,
            rowwise, mxfp8). MXFP8 rows appear only where the last axis is a multiple of 32.
        delayed_scales: ``{name: scale}``, the scale delayed scaling held for a tensor (e.g.
            ``tensor_report``'s); delayed scaling depends on earlier steps, so its rows appear
            only for the tensors named here (both formats cast with that scale).

    Returns:
        A list of dicts: ``tensor``, ``recipe``, ``format`` and the ``QuantStats`` row.

    Raises:
        ValueError: for an unknown recipe name.
    """
    from minigrad._checks import check_in
    names = tuple(RECIPES) if recipes is None else tuple(
        check_in("recipes", r, tuple(RECIPES), owner="what_if") for r in recipes)
    delayed_scales = delayed_scales or {}
    rows = []
    for tensor, x in tensors.items():
        x = x.data if isinstance(x, Tensor) else x
        for recipe_name in names:
            for fmt in (E4M3, E5M2):
                if recipe_name == "delayed":
                    if tensor not in delayed_scales:
                        continue
                    scale = delayed_scales[tensor]
                elif recipe_name == "mxfp8" and (x.ndim == 0 or x.shape[-1] % 32):
                    continue
                else:
                    scale = RECIPES[recipe_name]().scale_for(x, ScalingState(), fmt)
                rows.append({"tensor": tensor, "recipe": recipe_name, "format": fmt.name,
                             **quantize(x, fmt, scale)[1].row()})
    return rows
