"""``DistributedGradReducer``: data-parallel gradient all-reduce in fused buckets.

Each rank computes the gradients of its own slice of the global batch; the reducer sums them
across the ranks (and divides by the number of ranks with ``mean=True``) so that every rank
applies the same update::

    g = (g_0 + g_1 + ... + g_{n-1}) / n        (mean)      or      g_0 + ... + g_{n-1}  (sum)

Gradients are copied into a few flat buffers ("buckets", each at most ``bucket_bytes``, in
parameter order), multiplied by ``1/n`` on the way for the mean (as PyTorch's DDP divides
before it reduces: one pass over the gradients instead of two, and a sum that stays in the
gradients' range), and each bucket is reduced by ONE all-reduce: a 2.7 MB MLP is one collective
per step, not one per parameter (the fixed cost of a collective is paid per call). float16
gradients are copied into float32 buckets, so the sum is taken in float32 and cannot overflow
fp16's 65504; they come back float32, as the loss-scaled unscale returns them.

That every rank has the same model, starting from rank 0's values, is settled before: an
``Optimizer`` made in data-parallel mode calls ``communication.synchronize_parameters``.
"""
import numpy

from minigrad import _checks, backend, communication
from minigrad.communication import management
from minigrad.nn.cell import Cell
from minigrad.parameter import Parameter
from minigrad.tensor import make


class _Bucket:
    """Parameters ``indices`` packed at ``offsets`` into one flat buffer of ``dtype``."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.slots = []    # (parameter index, offset, size, shape)
        self.size = 0
        self.buffer = None

    def add(self, index, shape, size):
        self.slots.append((index, self.size, size, shape))
        self.size += size

    def flat(self, xp):
        if self.buffer is None or backend.get_array_module(self.buffer) is not xp:
            self.buffer = xp.empty(self.size, self.dtype)
        return self.buffer


def reduce_dtype(dtype):
    """The dtype a gradient of ``dtype`` is reduced in: float64 stays, everything else float32."""
    wide = numpy.dtype(dtype) == numpy.float64
    return numpy.dtype(numpy.float64 if wide else numpy.float32)


def plan_buckets(parameters, bucket_bytes):
    """Group the parameters, in order, into buckets of one reduce dtype holding at most
    ``bucket_bytes`` each (a parameter larger than that gets a bucket of its own)."""
    buckets, open_by_dtype = [], {}
    for i, p in enumerate(parameters):
        dtype = reduce_dtype(p.dtype)
        size = int(numpy.prod(p.shape, dtype=numpy.int64))
        bucket = open_by_dtype.get(dtype)
        if bucket is None or (bucket.size + size) * dtype.itemsize > bucket_bytes:
            bucket = open_by_dtype[dtype] = _Bucket(dtype)
            buckets.append(bucket)
        bucket.add(i, tuple(p.shape), size)
    return [b for b in buckets if b.size]


class DistributedGradReducer(Cell):
    """All-reduce gradients across the data-parallel group: ``reducer(grads)`` returns the
    reduced gradients (Tensors, in the order of ``parameters``).

    Args:
        parameters: the parameters whose gradients are reduced (e.g. ``optimizer.parameters``).
        mean: divide the sum by ``degree``. Default None: the context's ``gradients_mean``.
        degree: the divisor of the mean. Default None: the group size.
        fusion_type: accepted for MindSpore compatibility (buckets are made by size).
        group: the world group (None or ``"world"``; MindSpore's world group names too).
        bucket_bytes: the largest bucket, in bytes. Default None: the context's ``comm_fusion``
            size (25 MB).

    The returned arrays are views of the reducer's buckets, valid until its next call. A None
    gradient counts as zeros in the sum (another rank may have one) and comes back as an array.

    Raises:
        TypeError: an element of ``parameters`` that is not a Parameter, a non-bool ``mean``, a
            non-int ``degree`` or ``bucket_bytes``.
        ValueError: ``degree`` or ``bucket_bytes`` < 1, another ``group``; at a call, the wrong
            number of gradients or a gradient of the wrong size.
    """

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None,
                 bucket_bytes=None):
        super().__init__(auto_prefix=False)
        params = tuple(parameters)
        for i, p in enumerate(params):
            if not isinstance(p, Parameter):
                raise TypeError(f"DistributedGradReducer: 'parameters' element {i} must be a "
                                f"Parameter, got {type(p).__name__}")
        management._check_group(group, "DistributedGradReducer")
        owner = "DistributedGradReducer"
        self.mean = (communication.get_auto_parallel_context("gradients_mean") if mean is None
                     else _checks.check_bool("mean", mean, owner=owner))
        self.degree = (_group_degree() if degree is None
                       else _checks.check_positive_int("degree", degree, owner=owner))
        self.bucket_bytes = (communication.bucket_bytes() if bucket_bytes is None else
                             _checks.check_positive_int("bucket_bytes", bucket_bytes, owner=owner))
        self.weights = params  # a plain tuple: not registered, so not saved twice
        self.buckets = plan_buckets(params, self.bucket_bytes)

    def construct(self, grads):
        arrays = self.reduce_arrays([None if g is None else g.data for g in grads])
        return tuple(make(a, None, 0) for a in arrays)

    def reduce_arrays(self, arrays):
        """The reduced gradient arrays (one per parameter; see the class docstring): one
        all-reduce per bucket.

        Raises:
            ValueError: for the wrong number of arrays, or an array of the wrong size.
        """
        if len(arrays) != len(self.weights):
            raise ValueError(f"DistributedGradReducer: got {len(arrays)} gradients for "
                             f"{len(self.weights)} parameters")
        out = list(arrays)
        xp = backend.get_array_module(*[a for a in arrays if a is not None])
        divide = self.mean and self.degree != 1
        inv = 1.0 / self.degree  # a Python float: the bucket's dtype computes the product
        for bucket in self.buckets:
            flat = bucket.flat(xp)
            for index, offset, size, shape in bucket.slots:
                part = flat[offset:offset + size]
                grad = arrays[index]
                if grad is None:
                    part[...] = 0
                elif grad.size != size:
                    raise ValueError(f"DistributedGradReducer: the gradient of "
                                     f"{self.weights[index].name!r} has shape {grad.shape}, "
                                     f"expected {shape}")
                elif divide:
                    xp.multiply(grad.reshape(-1), inv, out=part, dtype=part.dtype)
                else:
                    part[...] = grad.reshape(-1)
            communication.all_reduce_(flat, "sum")
            for index, offset, size, shape in bucket.slots:
                out[index] = flat[offset:offset + size].reshape(shape)
        return out


def _group_degree():
    device_num = communication.get_auto_parallel_context("device_num")
    size = communication.get_group_size()
    if device_num and device_num != size:
        raise ValueError(f"DistributedGradReducer: the context's device_num {device_num} is not "
                         f"the group size {size}")
    return size

