"""The inputs of the overflow benchmark: one array of a given size, or a list of tensors with the
parameter sizes of a real model, in float16 or float32, all finite or with one +inf.

Every input lives in one flat buffer (a list's tensors are views into it, each starting on a
256-byte boundary as a CUDA allocation would), so the memory ceilings run over the same memory
as the methods. The values repeat a pattern of +-2**k * (1 + m/1024), |k| <= 8: multiplying
them by 0.5 or 2 is exact in both dtypes, so an in-place unscale alternating the two leaves the
data as it was after every second call, and the expected value of any element is known without
a copy (``Case.expected``).
"""
import numpy

ALIGN_BYTES = 256
PATTERN_SIZE = 1 << 16
_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """``"256M"`` -> 268435456: a count with an optional K, M or G suffix (powers of 2).

    Raises:
        ValueError: not a positive count.
    """
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    scale = _SUFFIXES.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    if not number.isdigit() or int(number) <= 0:
        raise ValueError(f"a size must be a positive count like 4K, 256M or 1G, got {text!r}")
    return int(number) * scale


def format_bytes(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def resnet50_shapes():
    """The 161 parameter tensors of torchvision's ResNet-50 (25,557,032 values), in order."""
    def conv_bn(cout, cin, k):
        return [(cout, cin, k, k), (cout,), (cout,)]
    shapes = conv_bn(64, 3, 7)
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            shapes += conv_bn(width, cin, 1) + conv_bn(width, width, 3) + conv_bn(4 * width,
                                                                                  width, 1)
            if b == 0:
                shapes += conv_bn(4 * width, cin, 1)  # the projection shortcut
            cin = 4 * width
    return shapes + [(1000, 2048), (1000,)]


def gpt2_small_shapes():
    """The 148 parameter tensors of GPT-2 small (124,439,808 values; the output layer shares
    the token embedding), in order."""
    d, vocab, context = 768, 50257, 1024
    layer = [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,), (d,), (d, 4 * d), (4 * d,),
             (4 * d, d), (d,)]
    return [(vocab, d), (context, d)] + layer * 12 + [(d,), (d,)]


MODELS = {"resnet50": resnet50_shapes, "gpt2-small": gpt2_small_shapes}


def parse_list(text):
    """A list of tensor sizes (element counts) from ``resnet50``, ``gpt2-small`` or ``NxE``
    (N tensors of E elements, E with an optional K/M/G suffix): ``(label, sizes)``.

    Raises:
        ValueError: none of these.
    """
    name = text.strip().lower()
    if name in MODELS:
        sizes = [int(numpy.prod(s)) for s in MODELS[name]()]
        return f"{name} ({len(sizes)} tensors)", sizes
    count, sep, each = name.partition("x")
    if sep and count.isdigit() and int(count) > 0:
        size = parse_size(each)
        return f"{count} x {size} elements", [size] * int(count)
    raise ValueError(f"a list must be one of {sorted(MODELS)} or NxE (N tensors of E elements, "
                     f"e.g. 1024x16K), got {text!r}")


def exact_pattern(dtype):
    """``PATTERN_SIZE`` values whose halving and doubling is exact in ``dtype``."""
    rng = numpy.random.default_rng(0)
    magnitude = numpy.ldexp(1 + rng.integers(0, 1024, PATTERN_SIZE) / 1024,
                            rng.integers(-8, 9, PATTERN_SIZE))
    return (magnitude * rng.choice([-1.0, 1.0], PATTERN_SIZE)).astype(dtype)


class Case:
    """One input on one device: ``flat`` (the buffer), ``arrays`` (views of it), and what the
    timed calls must find in it.

    Attributes:
        kind: ``"array"`` or ``"list"``; label: e.g. ``"256 MiB"``, ``"resnet50 (161 tensors)"``.
        dtype, finite: the values' dtype; False when one element is +inf.
        starts, sizes: each array's first element in ``flat`` and its element count.
        nbytes: the arrays' bytes (padding excluded).
        inf_at: the flat index of the +inf, or None.
        positions: flat indices the checks compare after each sample (numpy int64).
    """

    def __init__(self, xp, kind, label, sizes, dtype, finite):
        self.xp, self.kind, self.label = xp, kind, label
        self.dtype, self.finite = numpy.dtype(dtype), finite
        align = ALIGN_BYTES // self.dtype.itemsize
        self.sizes = list(sizes)
        self.starts = numpy.concatenate([[0], numpy.cumsum(
            [-(-n // align) * align for n in self.sizes])]).astype(numpy.int64)
        total = int(self.starts[-1])
        self.starts = self.starts[:-1]
        self.nbytes = sum(self.sizes) * self.dtype.itemsize
        self.pattern = exact_pattern(self.dtype)
        device_pattern = xp.asarray(self.pattern)
        self.flat = xp.tile(device_pattern, -(-total // PATTERN_SIZE))[:total]  # made on device
        self.arrays = [self.flat[s:s + n] for s, n in zip(self.starts, self.sizes)]
        middle = len(self.sizes) // 2 if kind == "list" else 0
        self.inf_at = None if finite else int(self.starts[middle] + self.sizes[middle] // 2)
        if self.inf_at is not None:
            self.flat[self.inf_at] = numpy.inf
        self.positions = self._positions()
        self.unscales = 0  # in-place multiplications so far: 0.5, 2, 0.5, ...

    @property
    def n_tensors(self):
        return len(self.sizes)

    def next_inv_scale(self):
        """The factor of the next in-place unscale (0.5 and 2 in turn), counted."""
        self.unscales += 1
        return 0.5 if self.unscales % 2 else 2.0

    def expected(self, positions=None):
        """The values at flat ``positions`` (default ``self.positions``) as the in-place unscales
        so far have left them (numpy, of ``dtype``)."""
        positions = self.positions if positions is None else positions
        values = self.pattern[positions % PATTERN_SIZE] * self.dtype.type(
            0.5 if self.unscales % 2 else 1.0)
        if self.inf_at is not None:
            values[positions == self.inf_at] = numpy.inf
        return values

    def per_array(self, positions):
        """``[(array index, local indices)]`` of flat ``positions``."""
        which = numpy.searchsorted(self.starts, positions, side="right") - 1
        return [(int(k), positions[which == k] - self.starts[k]) for k in numpy.unique(which)]

    def _positions(self):
        rng = numpy.random.default_rng(1)
        if self.kind == "array":
            n = self.sizes[0]
            found = [0, n - 1, n // 2, *rng.integers(0, n, 1021)]
        else:  # first, middle and last element of up to 64 tensors
            picked = numpy.unique(numpy.linspace(0, len(self.sizes) - 1, 64).astype(int))
            found = [self.starts[k] + i for k in picked
                     for i in (0, self.sizes[k] // 2, self.sizes[k] - 1)]
        if self.inf_at is not None:
            found.append(self.inf_at)
        return numpy.unique(numpy.asarray(found, numpy.int64))
