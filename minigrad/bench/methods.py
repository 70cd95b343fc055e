"""The methods the overflow benchmark times on a ``Case``: minigrad's kernels, the peers' ways to
do the same, and the two memory ceilings.

A method prepares result slots for up to ``slots`` calls, so that every call of a timed sample
leaves its own answer (its flag, or its all-finite boolean) and ``check`` can look at each of
them afterwards: a call that answers wrongly, or an unscale that leaves wrong values, raises
``WrongResult`` and fails the run. ``traffic`` is the bytes a call reads and writes, temporaries
included where the method makes them.
"""
import contextlib

import numpy

from minigrad import _native, backend
from minigrad.amp import float_status as fs
from minigrad.bench import environment

WIDEN_INV_SCALE = 0.25
READ_THREADS = 256  # kernels/bench.cu's MG_READ_THREADS


class WrongResult(Exception):
    """A timed call answered wrongly."""


class Method:
    """One way to check (and perhaps unscale) ``case``'s arrays; ``call(i)`` is the timed work of
    call ``i`` of a sample, ``reset`` clears the slots before a sample (untimed), ``check(calls)``
    validates the last sample."""
    name = ""
    role = "minigrad"  # or "peer", "ceiling"

    def __init__(self, case, slots):
        self.case, self.xp = case, case.xp

    def traffic(self):
        return self.case.nbytes

    def reset(self):
        pass

    def stream_context(self, stream):
        """A context that makes the method's library launch on ``stream`` (a CuPy stream)."""
        return contextlib.nullcontext()

    def _expect_flags(self, flags, calls):
        flags = numpy.asarray(flags, numpy.float64).reshape(calls, -1)
        want = 0.0 if self.case.finite else 1.0
        bad = numpy.flatnonzero((flags[:, 0] != want) | (flags[:, 1:] != 0).any(axis=1))
        if bad.size:
            raise WrongResult(f"{self.name}: call {bad[0]} of {calls} left the flag "
                              f"{flags[bad[0]].tolist()}, expected {want} in element 0 only")

    def _expect_answers(self, answers, calls):
        answers = numpy.asarray(answers).reshape(-1)[:calls]
        bad = numpy.flatnonzero(answers.astype(bool) != self.case.finite)
        if bad.size:
            raise WrongResult(f"{self.name}: call {bad[0]} of {calls} answered {answers[bad[0]]}"
                              f" for {'finite' if self.case.finite else 'non-finite'} data")

    def _expect_values(self, got, want, what):
        got, want = backend.as_numpy(got), numpy.asarray(want)
        utype = numpy.dtype(f"u{want.dtype.itemsize}")
        bad = numpy.flatnonzero(got.view(utype) != want.view(utype))
        if bad.size:
            raise WrongResult(f"{self.name}: {what}: {bad.size} of {got.size} sampled values "
                              f"wrong, e.g. {got[bad[0]]!r} for {want[bad[0]]!r}")

    def _expect_data(self, what="the data after the sample"):
        case = self.case
        self._expect_values(case.flat[self.xp.asarray(case.positions)], case.expected(), what)


class _StatusRows(Method):
    """minigrad's methods: each call sets the flag in its own status buffer."""

    def __init__(self, case, slots):
        super().__init__(case, slots)
        self.status = self.xp.zeros((slots, 8), numpy.float32)
        self.rows = [self.status[i] for i in range(slots)]

    def reset(self):
        self.status.fill(0)

    def check(self, calls):
        self._expect_flags(backend.as_numpy(self.status[:calls]), calls)


class MinigradCheck(_StatusRows):
    name = "minigrad check"

    def call(self, i):
        fs.check_overflow(self.rows[i], *self.case.arrays)


class MinigradUnscale(_StatusRows):
    name = "minigrad check+unscale"

    def traffic(self):
        return 2 * self.case.nbytes

    def call(self, i):
        fs.check_and_unscale(self.rows[i], self.case.arrays, self.case.next_inv_scale())

    def check(self, calls):
        super().check(calls)
        self._expect_data()


class MinigradWiden(_StatusRows):
    name = "minigrad fp16->fp32 check+unscale"
    outputs = ()

    def traffic(self):
        return 3 * self.case.nbytes  # fp16 read, fp32 written

    def call(self, i):
        self.outputs = fs.check_and_unscale_to_fp32(self.rows[i], self.case.arrays,
                                                    WIDEN_INV_SCALE)

    def check(self, calls):
        super().check(calls)
        case = self.case
        want = case.expected().astype(numpy.float32) * numpy.float32(WIDEN_INV_SCALE)
        got = [backend.as_numpy(self.outputs[k][self.xp.asarray(local)])
               for k, local in case.per_array(case.positions)]
        self._expect_values(numpy.concatenate(got), want, "the fp32 output of the last call")


class TorchFused(Method):
    name = "torch fused check+unscale"
    role = "peer"

    def __init__(self, case, slots, torch):
        super().__init__(case, slots)
        self.torch = torch
        on_gpu = self.xp is not numpy
        device = "cuda" if on_gpu else "cpu"
        wrap = torch.from_dlpack if on_gpu else torch.from_numpy
        self.tensors = [wrap(a) for a in case.arrays]  # the same memory
        self.found = torch.zeros(slots, dtype=torch.float32, device=device)
        self.slots = [self.found[i:i + 1] for i in range(slots)]
        self.inv = {v: torch.full((1,), v, dtype=torch.float32, device=device) for v in (0.5, 2.0)}

    def traffic(self):
        return 2 * self.case.nbytes

    def stream_context(self, stream):
        return _torch_stream(self.torch, stream)

    def reset(self):
        self.found.zero_()

    def call(self, i):
        self.torch._amp_foreach_non_finite_check_and_unscale_(
            self.tensors, self.slots[i], self.inv[self.case.next_inv_scale()])

    def check(self, calls):
        self._expect_flags(self.found[:calls].cpu().numpy(), calls)
        self._expect_data()


class _AllFinite(Method):
    """``isfinite(x).all()`` of one array: a boolean temporary written and read back."""
    role = "peer"

    def __init__(self, case, slots):
        super().__init__(case, slots)
        self.answers = [None] * slots

    def traffic(self):
        return self.case.nbytes + 2 * sum(self.case.sizes)


class TorchAllFinite(_AllFinite):
    name = "torch isfinite(x).all()"

    def __init__(self, case, slots, torch):
        super().__init__(case, slots)
        self.torch = torch
        on_gpu = self.xp is not numpy
        self.tensor = (torch.from_dlpack if on_gpu else torch.from_numpy)(case.arrays[0])

    def stream_context(self, stream):
        return _torch_stream(self.torch, stream)

    def call(self, i):
        self.answers[i] = self.torch.isfinite(self.tensor).all()

    def check(self, calls):
        self._expect_answers(self.torch.stack(self.answers[:calls]).cpu().numpy(), calls)


class ArrayAllFinite(_AllFinite):
    """CuPy's (GPU) or NumPy's (CPU) ``isfinite(x).all()``."""

    def __init__(self, case, slots):
        super().__init__(case, slots)
        self.name = f"{'numpy' if self.xp is numpy else 'cupy'} isfinite(x).all()"

    def call(self, i):
        self.answers[i] = self.xp.isfinite(self.case.arrays[0]).all()

    def check(self, calls):
        self._expect_answers(backend.as_numpy(self.xp.stack(self.answers[:calls])), calls)


class CopyCeiling(Method):
    """A device-to-device copy of the case's buffer (``cudaMemcpyAsync`` on a GPU), counted as
    the bytes read plus the bytes written."""
    name = "copy ceiling"
    role = "ceiling"

    def __init__(self, case, slots):
        super().__init__(case, slots)
        self.target = self.xp.empty_like(case.flat)

    def traffic(self):
        return 2 * self.case.flat.nbytes

    def reset(self):
        self.target[self.xp.asarray(self.case.positions)] = 0

    def call(self, i):
        self.xp.copyto(self.target, self.case.flat)

    def check(self, calls):
        self._expect_values(self.target[self.xp.asarray(self.case.positions)],
                            self.case.expected(), "the copy")


class ReadCeiling(Method):
    """The XOR of every 32-bit word of the case's buffer, the least work that reads each byte:
    ``mg_read_xor`` of kernels/bench.cu on a GPU, NumPy's ``bitwise_xor.reduce`` on the CPU."""
    name = "read ceiling"
    role = "ceiling"

    def __init__(self, case, slots):
        super().__init__(case, slots)
        self._reference = {}
        flat = case.flat
        if self.xp is numpy:
            self.words = flat.view(numpy.uint64)
            self.answers = [None] * slots
            return
        cupy = self.xp
        self.kernel = _native.cuda_function("mg_read_xor", _native.BENCH_SOURCE)
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            self.kernel.kernel.ptr, READ_THREADS, 0)
        sms = environment.device_attribute(cupy, "MultiProcessorCount")
        self.n_vecs = numpy.uint64(flat.nbytes // 16)
        self.grid = max(1, min(per_sm * sms, -(-int(self.n_vecs) // READ_THREADS)))
        self.out = cupy.zeros(slots, numpy.uint32)
        self.slots = [self.out[i:i + 1] for i in range(slots)]

    def traffic(self):
        return self.case.flat.nbytes

    def reset(self):
        if self.xp is not numpy:
            self.out.fill(0)

    def call(self, i):
        if self.xp is numpy:
            self.answers[i] = numpy.bitwise_xor.reduce(self.words)
        else:
            self.kernel((self.grid,), (READ_THREADS,), (self.case.flat, self.n_vecs,
                                                        self.slots[i]))

    def check(self, calls):
        want = self.reference()
        if self.xp is numpy:
            got = numpy.asarray(self.answers[:calls], numpy.uint64)
        else:
            got = backend.as_numpy(self.out[:calls])
        bad = numpy.flatnonzero(got != want)
        if bad.size:
            raise WrongResult(f"{self.name}: call {bad[0]} of {calls} gave {int(got[bad[0]])},"
                              f" expected {int(want)}")

    def reference(self):
        """The expected answer for the data as it is now, computed another way (cached per
        state: in-place unscales alternate between two)."""
        key = self.case.unscales % 2
        if key not in self._reference:
            words = self.case.flat.view(numpy.uint32)
            if self.xp is numpy:  # fold the two halves of each 64-bit word
                low, high = (int(numpy.bitwise_xor.reduce(words[k::2])) for k in (0, 1))
                self._reference[key] = numpy.uint64(low | high << 32)
            else:
                self._reference[key] = numpy.uint32(int(_xor_reduction(self.xp)(words)))
        return self._reference[key]


_xor_reductions = {}


def _xor_reduction(cupy):
    """CuPy's generic reduction of XOR (a ``ReductionKernel``, made once)."""
    if "kernel" not in _xor_reductions:
        _xor_reductions["kernel"] = cupy.ReductionKernel("T x", "T y", "x", "a ^ b", "y = a",
                                                         "0", "mg_xor_reduce")
    return _xor_reductions["kernel"]


def _torch_stream(torch, stream):
    if stream is None:
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.ExternalStream(stream.ptr))


def methods_for(case, slots, peers, torch):
    """The methods that apply to ``case``: minigrad's, the ``peers`` asked for, the ceilings."""
    found = [MinigradCheck(case, slots), MinigradUnscale(case, slots)]
    if case.dtype == numpy.float16:
        found.append(MinigradWiden(case, slots))
    if "torch" in peers:
        found.append(TorchFused(case, slots, torch))
        if case.kind == "array":
            found.append(TorchAllFinite(case, slots, torch))
    if case.kind == "array" and (case.xp is numpy or "cupy" in peers):
        found.append(ArrayAllFinite(case, slots))
    return found + [CopyCeiling(case, slots), ReadCeiling(case, slots)]
