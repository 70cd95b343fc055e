"""Tables, JSON and plots of benchmark results, and the overflow benchmark's shares and goals.

    print_table(rows, ["name", "ms", "ratio"])
    write_json("out.json", {"rows": rows})    # adds machine(): load average, BLAS threads
"""
import json
import math
import os

from minigrad.bench.environment import machine

# The goals the overflow benchmark states on a GPU, for arrays of at least GOAL_MIN_BYTES in hot
# mode and medians: (goal, method, measure, at least, where).
GOAL_MIN_BYTES = 256 << 20
GOALS = (
    ("check >= 90% of the read ceiling", "minigrad check", "share_read", 0.90, "array"),
    ("check+unscale >= 1.0x torch's fused kernel", "minigrad check+unscale", "x_vs_torch_fused",
     1.0, "array"),
    ("fp16->fp32 check+unscale >= 85% of the copy ceiling", "minigrad fp16->fp32 check+unscale",
     "share_copy", 0.85, "array"),
    ("check+unscale of >= 1000 tensors >= 1.0x torch's fused kernel", "minigrad check+unscale",
     "x_vs_torch_fused", 1.0, "list>=1000"),
)


def print_table(rows, columns, file=None):
    """Print ``rows`` (dicts) as an aligned text table of ``columns``; floats with 4 digits."""
    def cell(value):
        if isinstance(value, float):
            return "-" if math.isnan(value) else f"{value:.4g}"
        return "-" if value is None else str(value)
    table = [columns] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for k, line in enumerate(table):
        print("  ".join(text.rjust(w) if k else text.ljust(w) for text, w in zip(line, widths)),
              file=file)
        if k == 0:
            print("  ".join("-" * w for w in widths), file=file)


def write_json(path, payload):
    """Write ``payload`` to ``path`` as indented JSON, with a ``machine`` entry (``machine()``:
    the load average and the BLAS threads) unless it has one. The file is replaced whole (written
    beside it, then renamed), so a reader never sees half of it."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    staged = f"{path}.partial"
    with open(staged, "w") as f:
        json.dump({"machine": machine(), **payload}, f, indent=2, default=_plain)
        f.write("\n")
    os.replace(staged, path)


def _plain(value):
    # NumPy scalars become Python numbers; anything else JSON cannot hold becomes its text
    return value.item() if hasattr(value, "item") else str(value)


def add_shares(rows, rated_bytes_per_s=None):
    """Fill in each row's bandwidth shares: of the read and copy ceilings measured on the same
    input and mode, of the rated bandwidth, and the speed against torch's fused kernel (its
    median time / this median time) where both ran."""
    groups = {}
    for row in rows:
        groups.setdefault(_group(row), {})[row["method"]] = row
    for row in rows:
        peers = groups[_group(row)]
        gb_s = row.get("gb_s")
        for key, ceiling in (("share_read", "read ceiling"), ("share_copy", "copy ceiling")):
            other = peers.get(ceiling, {}).get("gb_s")
            row[key] = gb_s / other if gb_s and other else None
        row["share_rated"] = gb_s * 1e9 / rated_bytes_per_s if gb_s and rated_bytes_per_s else None
        torch_us = peers.get("torch fused check+unscale", {}).get("us_median")
        row["x_vs_torch_fused"] = torch_us / row["us_median"] if torch_us and row.get(
            "us_median") else None
    return rows


def _group(row):
    return (row["input"], row["dtype"], row["case"], row["mode"])


def goals(rows):
    """Each goal of ``GOALS`` per dtype with the rows it applies to: met, the worst value."""
    found = []
    for goal, method, measure, least, where in GOALS:
        for dtype in ("float16", "float32"):
            values = [row[measure] for row in rows
                      if row["method"] == method and row["dtype"] == dtype and row["mode"] == "hot"
                      and row["case"] == "finite" and row.get(measure) is not None
                      and _applies(row, where)]
            if values:
                worst = min(values)
                found.append({"goal": goal, "dtype": dtype, "worst": worst, "at_least": least,
                              "met": worst >= least, "rows": len(values)})
    return found


def _applies(row, where):
    if where == "array":
        return row["kind"] == "array" and row["bytes"] >= GOAL_MIN_BYTES
    return row["kind"] == "list" and row["tensors"] >= 1000


def plot(rows, path, rated_gb_s=None):
    """Draw GB/s (bytes read + written per second) against the array size for every method,
    hot mode, finite data, one panel per dtype; the rated bandwidth as a dashed line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arrays = [r for r in rows if r["kind"] == "array" and r["mode"] == "hot"
              and r["case"] == "finite" and r.get("gb_s")]
    dtypes = sorted({r["dtype"] for r in arrays})
    figure, axes = plt.subplots(1, max(1, len(dtypes)), figsize=(6.5 * max(1, len(dtypes)), 4.5),
                                squeeze=False)
    for ax, dtype in zip(axes[0], dtypes):
        for method in dict.fromkeys(r["method"] for r in arrays if r["dtype"] == dtype):
            points = sorted((r["bytes"], r["gb_s"]) for r in arrays
                            if r["dtype"] == dtype and r["method"] == method)
            style = "--" if "ceiling" in method else "-"
            ax.plot(*zip(*points), style, marker="o", label=method)
        if rated_gb_s:
            ax.axhline(rated_gb_s, color="gray", linestyle=":", label="rated bandwidth")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("array bytes")
        ax.set_ylabel("GB/s read + written")
        ax.set_title(dtype)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
