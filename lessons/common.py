"""What every lesson shares: its command line, its output folder, and fp16's limits on a plot.

A lesson runs as a plain script (``python lessons/01_fp16_up_close.py --quick``) or opens as a
notebook through jupytext; either way its folder is on ``sys.path``, so ``import common`` works.
"""
import argparse
import os
import sys
import tempfile

import numpy

FP16 = numpy.finfo(numpy.float16)
FP16_MAX = float(FP16.max)                      # 65504: the largest finite fp16 value
FP16_NORMAL_MIN = float(FP16.tiny)              # 2**-14 = 6.1e-5: the smallest normal value
FP16_SUBNORMAL_MIN = float(FP16.smallest_subnormal)  # 2**-24 = 6e-8: the smallest positive value
FP16_LIMITS = ((FP16_MAX, "65504 (largest fp16)", "tab:red"),
               (FP16_NORMAL_MIN, "6.1e-5 (smallest normal)", "tab:green"),
               (FP16_SUBNORMAL_MIN, "6e-8 (smallest subnormal)", "tab:orange"))


def parse_args(doc, argv=None, extra=None):
    """The lesson's arguments: ``--out FOLDER`` (default: a new temporary folder) and ``--quick``.

    ``doc`` is the lesson's module docstring (its first line is the help text); ``extra``, if
    given, adds arguments to the parser. In a notebook (jupytext) there is no command line:
    unknown arguments such as Jupyter's own are ignored there.
    """
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--out", metavar="FOLDER",
                        help="where the PNG files go (created if missing; default: a new "
                             "temporary folder, printed)")
    parser.add_argument("--quick", action="store_true", help="a small run that takes seconds")
    if extra is not None:
        extra(parser)
    in_notebook = "ipykernel" in sys.modules
    args = parser.parse_known_args(argv)[0] if in_notebook else parser.parse_args(argv)
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="minigrad-lesson-")
    elif os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"argument --out: {args.out!r} exists and is not a folder")
    os.makedirs(args.out, exist_ok=True)
    print(f"figures go to {args.out}")
    return args


def pyplot():
    """``matplotlib.pyplot`` on a file-only backend, or exit 0 saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        print('this lesson draws with matplotlib, which is not installed: pip install ".[plots]"')
        sys.exit(0)
    if "ipykernel" not in sys.modules:  # a notebook keeps its inline backend
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, out, name):
    """Save ``fig`` as ``out/name`` (PNG, 110 dpi), close it, print and return the path (in a
    notebook the figure is also displayed below the cell)."""
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    if "ipykernel" in sys.modules:  # in a notebook, show it under the cell too
        from IPython.display import display
        display(fig)
    import matplotlib.pyplot as plt
    plt.close(fig)
    print(f"saved {path}")
    return path


def mark_fp16_limits(ax, axis="x", exponents=False, labels=True, span=(0.0, numpy.inf)):
    """Draw fp16's three limits on ``ax`` as dashed lines across the ``axis`` ("x" or "y").

    With ``exponents=True`` the axis holds binary exponents e, a bar at e standing for the
    values in [2**e, 2**(e + 1)) (as ``minigrad.amp.plots`` draws them): the lines then sit on
    the bin edges, left of the smallest subnormal's and the smallest normal's bins (-24.5 and
    -14.5) and right of 65504's (15.5). ``labels=False`` draws the lines without legend
    entries. Only limits inside ``span`` (a pair of values, not exponents) are drawn, so a
    legend never names a line that lies off the plot.
    """
    line = ax.axvline if axis == "x" else ax.axhline
    for value, text, color in FP16_LIMITS:
        if not span[0] <= value <= span[1]:
            continue
        where = value
        if exponents:
            where = numpy.floor(numpy.log2(value)) + (0.5 if value == FP16_MAX else -0.5)
        line(where, color=color, linestyle="--", linewidth=1.2, label=text if labels else None)


def log_scale_if_wide(ax, values, axis="y"):
    """Put ``axis`` of ``ax`` on a log scale when the positive ``values`` span more than a
    decade; return the label suffix to use (", log" or "")."""
    values = numpy.asarray(values, numpy.float64)
    values = values[numpy.isfinite(values) & (values > 0)]
    if values.size and values.max() > 10 * values.min():
        (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
        return ", log"
    return ""


def heading(text):
    """Print a section heading (a lesson's printed output reads as its cells do)."""
    print(f"\n== {text}")
