"""``DistributedGradReducer``: data-parallel gradient all-reduce in fused buckets.

Each rank computes the gradients of its own slice of the global batch; the reducer sums them
across the ranks (and divides by the number of ranks with ``mean=True``) so that every rank
applies the same update::

    g = (g_0 + g_1 + ... + g_{n-1}) / n        (mean)      or      g_0 + ... + g_{n-1}  (sum)

Gradients are copied into a few flat buffers ("buckets"), multiplied by ``1/n`` on the way for
the mean (as PyTorch's DDP divides before it reduces: one pass over the gradients instead of
two, and a sum that stays in the gradients' range), and each bucket is reduced by ONE
all-reduce: a 2.7 MB MLP is one collective per step, not one per parameter (the fixed cost of
a collective is paid per call). float16 gradients are copied into float32 buckets, so the sum is
taken in float32 and cannot overflow fp16's 65504; they come back float32, as the loss-scaled
unscale returns them. The buffers are made once and reused at every step.

On one machine a bucket is a row of memory the ranks share (``communication.all_reduce_buffer``;
unless the context's ``all_reduce_shared_memory`` was False when the reducer was made): its
all-reduce is two barriers and a sum of each rank's share of the columns, about half the time of
MPI's ``Allreduce`` of the same bytes on 2 ranks (``benchmarks/parallel.py``).

Buckets are filled as PyTorch's DDP fills them: in reverse parameter order (backward makes the
last layers' gradients first), each closed once it holds ``bucket_bytes``.

With ``overlap=True`` the reducer also overlaps as DDP does: the first bucket closes at 1 MiB,
and ``TrainOneStepCell`` runs backward inside ``reducer.overlapping()``, where each gradient is
copied into its bucket as soon as backward has made it final and each full bucket but the last
starts its all-reduce at once (``communication.all_reduce_start``, MPI's ``Iallreduce``) while
backward computes the others; ``reducer(grads)`` then reduces the last bucket and waits for the
others. That pays where a started all-reduce moves on by itself (a network card, a spare
core). Open MPI progresses a started all-reduce only inside MPI calls, its ``Iallreduce`` is
slower than its blocking ``Allreduce`` at these sizes, and with a core per busy rank the
transfer takes CPU time from backward anyway: on 2 ranks of 2 cores
(``benchmarks/parallel.py``, the 2.7 MB MLP) the overlapped step is 2-7% slower than one
blocking all-reduce after backward, so ``overlap=False`` is the default.

That every rank has the same model, starting from rank 0's values, is settled before: an
``Optimizer`` made in data-parallel mode calls ``communication.synchronize_parameters``.
"""
import contextlib

import numpy

from minigrad import _checks, backend, communication
from minigrad.autograd import engine
from minigrad.communication import management
from minigrad.nn.cell import Cell
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor, make

FIRST_BUCKET_BYTES = 2 ** 20  # PyTorch DDP's first bucket (torch.distributed's 1 MiB default)


class _Bucket:
    """Parameters packed at offsets into one flat buffer of ``dtype``, reduced by one
    all-reduce; during an overlapped backward, ``missing`` counts the slots still to fill and
    ``pending`` holds the started all-reduce."""

    def __init__(self, dtype, limit):
        self.dtype, self.limit = dtype, limit
        self.slots = []    # (parameter index, offset, size, shape)
        self.size = 0
        self.buffer = None
        self.group = None  # the communication group the buffer was made in
        self.missing = 0
        self.pending = None

    def add(self, index, shape, size):
        self.slots.append((index, self.size, size, shape))
        self.size += size

    def full(self):
        return self.size * self.dtype.itemsize >= self.limit

    def flat(self, xp, shared):
        """The bucket's buffer on ``xp``'s device for the current group, made at first use (and
        again after ``release()`` or another ``init()``): with ``shared`` a host buffer from
        ``communication.all_reduce_buffer`` (a row of memory the ranks share)."""
        group = management.current()
        if (self.buffer is None or backend.get_array_module(self.buffer) is not xp
                or self.group is not group):
            self.buffer = (communication.all_reduce_buffer(self.size, self.dtype, shared=True)
                           if shared and xp is numpy else xp.empty(self.size, self.dtype))
            self.group = group
        return self.buffer


def reduce_dtype(dtype):
    """The dtype a gradient of ``dtype`` is reduced in: float64 stays, everything else float32."""
    wide = numpy.dtype(dtype) == numpy.float64
    return numpy.dtype(numpy.float64 if wide else numpy.float32)


def plan_buckets(parameters, bucket_bytes, first_bucket_bytes=FIRST_BUCKET_BYTES):
    """Group the parameters into buckets of one reduce dtype, from the last parameter to the
    first (PyTorch DDP's order): a bucket is closed once it holds ``bucket_bytes`` (the first of
    each dtype once it holds ``min(first_bucket_bytes, bucket_bytes)``), so it exceeds the limit
    by less than its last parameter."""
    buckets, open_by_dtype = [], {}
    first = min(first_bucket_bytes, bucket_bytes)
    for i in range(len(parameters) - 1, -1, -1):
        p = parameters[i]
        dtype = reduce_dtype(p.dtype)
        size = int(numpy.prod(p.shape, dtype=numpy.int64))
        bucket = open_by_dtype.get(dtype)
        if bucket is None or bucket.full():
            made = any(b.dtype == dtype for b in buckets)
            bucket = open_by_dtype[dtype] = _Bucket(dtype, bucket_bytes if made else first)
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
        overlap: True: the first bucket closes at 1 MiB and, within ``overlapping()``, the
            buckets' all-reduces start during backward (PyTorch DDP). Default False: every
            bucket is reduced by a blocking all-reduce once backward has ended (see the module
            docstring for why). Every rank must make the same choice.

    The returned arrays are views of the reducer's buckets, valid until its next call. A None
    gradient counts as zeros in the sum (another rank may have one) and comes back as an array.

    Raises:
        TypeError: an element of ``parameters`` that is not a Parameter, a non-bool ``mean``
            or ``overlap``, a non-int ``degree``, ``bucket_bytes`` or ``fusion_type``, a
            ``group`` that is neither None nor a str.
        ValueError: ``degree`` or ``bucket_bytes`` < 1, ``fusion_type`` < 0, another
            ``group``; at a call, the wrong number of gradients or a gradient of the wrong
            size.
    """
    _takes_policy = False  # not a layer: no Keras dtype policy

    def __init__(self, parameters, mean=None, degree=None, fusion_type=1, group=None,
                 bucket_bytes=None, overlap=False):
        super().__init__(auto_prefix=False)
        owner = "DistributedGradReducer"
        params = tuple(_checks.check_items("parameters", parameters, Parameter,
                                           expected="an iterable of Parameters", owner=owner))
        _checks.check_non_negative_int("fusion_type", fusion_type, owner=owner)
        _checks.check_type("group", group, (str, type(None)), expected="None or a str",
                           owner=owner)
        management._check_group(group, owner)
        self.mean = (communication.get_auto_parallel_context("gradients_mean") if mean is None
                     else _checks.check_bool("mean", mean, owner=owner))
        self.degree = (_group_degree() if degree is None
                       else _checks.check_positive_int("degree", degree, owner=owner))
        self.bucket_bytes = (communication.bucket_bytes() if bucket_bytes is None else
                             _checks.check_positive_int("bucket_bytes", bucket_bytes, owner=owner))
        self.overlap = _checks.check_bool("overlap", overlap, owner=owner)
        # buckets in shared memory (made at the first step) unless overlapped or switched off
        self.shared = not self.overlap and communication.get_auto_parallel_context(
            "all_reduce_shared_memory")
        self.weights = params  # a plain tuple: not registered, so not saved twice
        self.buckets = plan_buckets(params, self.bucket_bytes,
                                    FIRST_BUCKET_BYTES if self.overlap else self.bucket_bytes)
        self._slot_of = {slot[0]: (bucket, slot) for bucket in self.buckets
                         for slot in bucket.slots}
        self._reported = None  # during overlapping(): the indices of the gradients copied in
        self._started = 0      # ... and how many buckets' all-reduces have started

    def construct(self, grads):
        if not isinstance(grads, (tuple, list)):
            _checks.check_type("grads", grads, (tuple, list), expected="a tuple or list with one "
                               "gradient per parameter", owner="DistributedGradReducer")
        try:  # each step's gradients: looked at one by one only on failure
            arrays = [None if g is None else g.data for g in grads]
        except AttributeError:
            _checks.check_items("grads", grads, (Tensor, type(None)), expected="Tensors (or "
                                "None), one per parameter", owner="DistributedGradReducer")
            raise
        arrays = self.reduce_arrays(arrays)
        return tuple(make(a, None, 0) for a in arrays)

    @contextlib.contextmanager
    def overlapping(self):
        """Within the block, a backward copies each gradient of ``parameters`` into its bucket
        as soon as it is final, and starts the all-reduce of each full bucket but the last (in
        bucket order, the same on every rank); the next ``reducer(grads)`` (with the same
        gradients) finishes the step. Nothing changes in a group of one, or with ``overlap``
        False."""
        if not self.overlap or communication.get_group_size() == 1:
            yield
            return
        self._finish_started()  # an earlier block whose step never reached reduce_arrays
        for bucket in self.buckets:
            bucket.missing = len(bucket.slots)
        self._reported, self._started = set(), 0
        with engine.on_gradient_ready(self.weights, self._gradient_ready):
            yield

    def _gradient_ready(self, index, grad):
        if self._reported is None or index in self._reported:
            return  # a backward after this step's reduce_arrays, or a second one before it
        dtype = self.weights[index].data.dtype
        grad = grad if grad.dtype == dtype else grad.astype(dtype)  # as backward returns it
        xp = backend.get_array_module(grad)
        bucket, slot = self._slot_of[index]
        self._check_size(slot, grad)
        self._copy_in(bucket.flat(xp, False), slot, grad, xp)
        self._reported.add(index)
        bucket.missing -= 1
        last = len(self.buckets) - 1
        while self._started < last and self.buckets[self._started].missing == 0:
            started = self.buckets[self._started]
            started.pending = communication.all_reduce_start(started.buffer, "sum")
            self._started += 1
        for started in self.buckets[:self._started]:
            started.pending.test()  # MPI progresses a started all-reduce only inside MPI calls

    def _check_size(self, slot, grad):
        index, _, size, shape = slot
        if grad is not None and getattr(grad, "size", None) != size:
            _checks.check_relation(f"arrays[{index}]", grad, hasattr(grad, "shape"),
                                   f"an array (the gradient of {self.weights[index].name!r})",
                                   error=TypeError, owner="DistributedGradReducer")
            raise ValueError(f"DistributedGradReducer: the gradient of "
                             f"{self.weights[index].name!r} has shape {grad.shape}, "
                             f"expected {shape}")

    def _copy_in(self, flat, slot, grad, xp):
        index, offset, size, shape = slot
        part = flat[offset:offset + size]
        if grad is None:
            part[...] = 0
        elif self.mean and self.degree != 1:  # a Python float: the bucket's dtype computes it
            xp.multiply(grad.reshape(-1), 1.0 / self.degree, out=part, dtype=part.dtype)
        else:
            part[...] = grad.reshape(-1)

    def _finish_started(self):
        for bucket in self.buckets:
            if bucket.pending is not None:
                bucket.pending.wait()
                bucket.pending = None
        self._reported = None

    def reduce_arrays(self, arrays):
        """The reduced gradient arrays (one per parameter; see the class docstring): one
        all-reduce per bucket. After an overlapped backward (``overlapping``) only the
        gradients backward did not report are copied in, the buckets not yet started are
        started in order (the last one reduced at once) and every all-reduce is waited for.

        Raises:
            TypeError: for ``arrays`` that are not a tuple or a list.
            ValueError: for the wrong number of arrays, or an array of the wrong size.
        """
        if not isinstance(arrays, (tuple, list)):
            _checks.check_type("arrays", arrays, (tuple, list), expected="a tuple or list with "
                               "one array per parameter", owner="DistributedGradReducer")
        if len(arrays) != len(self.weights):
            _checks.check_relation("arrays", arrays, False, f"{len(self.weights)} arrays, one per "
                                   f"parameter (not {len(arrays)})",
                                   owner="DistributedGradReducer")
        for bucket in self.buckets:  # every size before the first copy: nothing half-reduced
            for slot in bucket.slots:
                self._check_size(slot, arrays[slot[0]])
        reported = self._reported
        xp = backend.get_array_module(*[a for a in arrays if a is not None])
        for k, bucket in enumerate(self.buckets):
            flat = bucket.flat(xp, self.shared)
            for slot in bucket.slots:
                if reported is None or slot[0] not in reported:
                    self._copy_in(flat, slot, arrays[slot[0]], xp)
            if reported is None or k == len(self.buckets) - 1:
                communication.all_reduce_(flat, "sum")
            elif bucket.pending is None:
                bucket.pending = communication.all_reduce_start(flat, "sum")
        self._finish_started()
        out = list(arrays)
        for bucket in self.buckets:
            for index, offset, size, shape in bucket.slots:
                out[index] = bucket.buffer[offset:offset + size].reshape(shape)
        return out


def _group_degree():
    device_num = communication.get_auto_parallel_context("device_num")
    size = communication.get_group_size()
    if device_num and device_num != size:
        raise ValueError(f"DistributedGradReducer: the context's device_num {device_num} is not "
                         f"the group size {size}")
    return size

