"""The scale and amax of each FP8 tensor over a run, as numbers and as a plot.

``history(net)`` returns, per FP8 tensor of ``net``, one amax and one scale per cast (from the
``ScalingState.trace`` each layer keeps under ``fp8_autocast``); ``plot_history`` draws them on
log axes, one panel per layer, so a scale that lags a jump of amax (delayed scaling) shows as a
step where ``amax · scale`` exceeds the format's max (``pip install minigrad[plots]``).
"""
import numpy

from minigrad.fp8.report import fp8_states


def history(net):
    """``{name: {"amax": array, "scale": array, "max": float}}`` for every FP8 tensor of ``net``
    cast at least once (one entry per cast; ``max`` is the format's largest value)."""
    out = {}
    for name, state in fp8_states(net):
        if state.trace:
            amax, scale = numpy.array(state.trace, dtype=numpy.float64).T
            out[name] = {"amax": amax, "scale": scale, "max": state.fmt.max}
    return out


def plot_history(net, axes=None):
    """Draw ``history(net)``: per layer one panel with each tensor's amax (solid) and the amax
    its scale allows, ``max / scale`` (dashed); where amax rises above the dashed line the cast
    clipped. Returns the list of matplotlib Axes.

    Args:
        net: a Cell whose layers ran under ``fp8_autocast``.
        axes: a sequence of Axes, one per layer (default: a new figure).

    Raises:
        ImportError: without matplotlib (``pip install minigrad[plots]``).
        ValueError: when no FP8 tensor of ``net`` has been cast, or ``axes`` has too few Axes.
    """
    data = history(net)
    if not data:
        raise ValueError("plot_history: no FP8 tensor of net has been cast (run it under "
                         "fp8_autocast first)")
    layers = list(dict.fromkeys(name.rsplit(".", 1)[0] for name in data))  # in network order
    if axes is None:
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise ImportError("minigrad.fp8.plots needs matplotlib: pip install "
                              "'minigrad[plots]'") from error
        _, axes = plt.subplots(len(layers), 1, figsize=(7, 2.2 * len(layers)), squeeze=False)
        axes = list(axes[:, 0])
    if len(axes) < len(layers):
        raise ValueError(f"plot_history: axes must hold {len(layers)} Axes (one per layer), got "
                         f"{len(axes)}")
    for ax, layer in zip(axes, layers):
        for name, d in data.items():
            if name.rsplit(".", 1)[0] != layer:
                continue
            line, = ax.plot(d["amax"], label=f"{name.rsplit('.', 1)[1]} amax")
            ax.plot(d["max"] / d["scale"], "--", color=line.get_color(), label="max / scale")
        ax.set_yscale("log")
        ax.set_title(layer, fontsize=9)
        ax.set_xlabel("cast")
        ax.legend(fontsize=7, ncol=3)
    return axes
