# %% [markdown]
# # Lesson 3 — the float status, a sticky overflow flag
#
# MindSpore on Ascend reads a hardware overflow register: `NPUAllocFloatStatus`,
# `NPUClearFloatStatus`, `NPUGetFloatStatus`. CPUs and GPUs have no such register, so minigrad
# keeps a small buffer in memory that check kernels only ever *set* and only a clear *resets*.
# This lesson walks through allocate, clear, check, read; shows why "sticky" matters; prints the
# kernel's source beside what it does to the bits; and runs it on the CPU and, when there is
# one, on the GPU.
#
#     python lessons/03_float_status.py [--out FOLDER] [--quick]

# %%
"""Lesson 3: the float status: allocate, clear, check, read; sticky semantics; the kernel."""
import re

import common
import numpy

from minigrad import Tensor, backend, ops
from minigrad.amp import float_status

args = common.parse_args(__doc__)
plt = common.pyplot()

# %% [markdown]
# ## Allocate, clear, check, read
# The status is 8 float32 zeros. A check over any number of arrays stores 1.0 in element 0 if
# one of their elements is inf or NaN. MindSpore's convention: the sum is 0 when all was
# finite and > 0 otherwise.

# %%
common.heading("allocate, clear, check, read (MindSpore's op names)")
alloc, clear, get = ops.NPUAllocFloatStatus(), ops.NPUClearFloatStatus(), ops.NPUGetFloatStatus()
status = alloc()
print("allocated:", status.asnumpy())
clear(status)
grads = [Tensor(numpy.full(1000, 3.0, numpy.float16)),  # Tensors: on the status's device
         Tensor(numpy.linspace(-1, 1, 7, dtype=numpy.float32))]
float_status.check_overflow(status, *grads)
print("after a check of finite fp16 and fp32 arrays:", get(status).asnumpy(),
      "-> overflow:", float_status.get_status(status))
float_status.check_overflow(status, Tensor(numpy.array([1.0, numpy.inf], numpy.float16)))
print("after a check of an array holding inf:       ", get(status).asnumpy(),
      "-> overflow:", float_status.get_status(status))

# %% [markdown]
# ## Sticky: a clean check never resets the flag
# A training step checks many gradients, maybe in several launches. If the flag were
# overwritten by each check, the last (clean) array would hide the overflow of an earlier one
# and the step would apply inf to the weights. Sticky flags make the order irrelevant: only
# `clear` resets it, once per step.

# %%
common.heading("sticky semantics")
clear(status)
sequence = [("finite", numpy.ones(5, numpy.float32)),
            ("NaN", numpy.array([numpy.nan], numpy.float32)),
            ("finite", numpy.ones(5, numpy.float16)), ("finite", numpy.zeros(3, numpy.float32))]
for label, array in sequence:
    float_status.check_overflow(status, Tensor(array))
    print(f"check a {label:6s} array -> flag {float_status.get_status(status)}")
clear(status)
print(f"clear                  -> flag {float_status.get_status(status)}")

# %% [markdown]
# Views count as what they show: a strided view skips the elements between its strides.

# %%
data = numpy.ones(12, numpy.float32)
data[4] = numpy.inf                       # not in data[::3] (indices 0, 3, 6, 9)
data = Tensor(data).data                  # the array on the context's device (NumPy or CuPy)
clear(status)
float_status.check_overflow(status, data[::3])
print("inf at index 4, check of data[::3]:", float_status.get_status(status))
float_status.check_overflow(status, data[1::3])
print("then a check of data[1::3] (holds index 4):", float_status.get_status(status))

# %% [markdown]
# ## What the kernel does
# The check never compares floats. A value is inf or NaN exactly when its exponent bits are all
# ones. For fp16 the exponent is bits 10..14 (mask 0x7C00); adding 0x0400 (one unit of
# exponent) to an all-ones exponent carries into bit 15, and only then. So
# `acc |= (w & 0x7C00) + 0x0400` over every element, then one test of bit 15, answers
# "any inf or NaN?". In a 32-bit word the same trick tests two fp16 values at once
# (`MASK = 0x7C007C00`, `CARRY = 0x04000400`). This is the source that ships with minigrad
# (package data `minigrad.kernels`):

# %%
common.heading("the kernel source (kernels/float_status.cu)")
source = float_status.kernel_source()
struct = re.search(r"struct Fp16 \{.*?\n\};", source, re.DOTALL).group(0)
fp32_masks = re.search(r"struct Fp32 \{.*?(static constexpr[^;]*;)", source, re.DOTALL).group(1)
body = re.search(r"template <class F, bool UNSCALE, bool WIDEN>.*?\n\}", source, re.DOTALL).group(0)
print(struct)
print("...")
print(body)
print(f"({len(source.splitlines())} lines in all; fp32's masks: {fp32_masks})")

# %% [markdown]
# The same trick in NumPy, on the bit patterns of a few fp16 values: the top bit of
# `(w & 0x7C00) + 0x0400` is set for inf and NaN only, 65504 included among the finite.

# %%
common.heading("the bit trick on single fp16 values")
samples = numpy.array([1.0, -2.5, 65504.0, 6e-8, 0.0, numpy.inf, -numpy.inf, numpy.nan],
                      numpy.float16)
words = samples.view(numpy.uint16).astype(numpy.uint32)
folded = (words & 0x7C00) + 0x0400
flags = (folded & 0x8000) != 0
for value, word, fold, flag in zip(samples, words, folded, flags):
    print(f"{float(value):>8g}  bits {int(word):016b}  (w & 0x7C00) + 0x0400 = {int(fold):016b}"
          f"  -> {'inf/NaN' if flag else 'finite'}")
assert list(flags) == list(~numpy.isfinite(samples))

# %%
fig, ax = plt.subplots(figsize=(11, 5), constrained_layout=True)
colors = {"sign": "#c7d7f0", "exponent": "#f6c89f", "fraction": "#d9ead3"}
for row, (value, word, flag) in enumerate(zip(samples, words, flags)):
    y = len(samples) - 1 - row
    for bit in range(16):
        field = "sign" if bit == 15 else "exponent" if bit >= 10 else "fraction"
        x = 15 - bit
        ax.add_patch(plt.Rectangle((x, y), 0.95, 0.9, color=colors[field]))
        ax.text(x + 0.47, y + 0.42, str((int(word) >> bit) & 1), ha="center", va="center",
                fontsize=9)
    name = f"{float(value):.6g}" if abs(value) >= 1 else f"{float(value):.3g}"
    ax.text(-0.4, y + 0.42, name, ha="right", va="center", fontsize=10)
    ax.text(16.4, y + 0.42, "exponent + 1 carries into bit 15:\ninf/NaN, flag set" if flag
            else "no carry into bit 15:\nfinite, flag unchanged",
            va="center", fontsize=10, color="tab:red" if flag else "black")
for field, color in colors.items():
    ax.add_patch(plt.Rectangle((0, 0), 0, 0, color=color, label=f"{field} bits"))
ax.set_xlim(-3, 23)
ax.set_ylim(-0.3, len(samples) + 0.2)
ax.set_xticks([x + 0.47 for x in range(16)], [str(15 - x) for x in range(16)])
ax.set_yticks([])
ax.set_xlabel("bit position in the fp16 word (15 = sign, 14..10 = exponent, 9..0 = fraction)")
ax.set_title("the float-status check: a value is inf or NaN exactly when its 5 exponent bits are "
             "all ones")
ax.legend(loc="upper center", bbox_to_anchor=(0.4, -0.12), ncol=3, fontsize="small")
common.save(fig, args.out, "float_status_bits.png")

# %% [markdown]
# ## Where it runs
# On the CPU the *same* CUDA source is compiled through `kernels/host_shim.h` (one block per
# core, plain vectorisable loops) and called with ctypes; without a C++ compiler (or with
# `MINIGRAD_NATIVE=0`) a NumPy fallback gives the same answers. On a GPU CuPy compiles it with
# NVRTC. The same checks, on every device present:

# %%
common.heading("the same checks on every device")
kind, reason = float_status.host_implementation()
print("CPU:", "the kernel source compiled for this CPU (native library loaded)" if kind == "native"
      else f"NumPy fallback ({reason})")
devices = ["CPU"] + (["GPU"] if backend.CUDA_AVAILABLE else [])
if not backend.CUDA_AVAILABLE:
    print(f"GPU: none here ({backend.CUPY_IMPORT_ERROR}); the GPU part of this lesson is skipped")
size = 1 << (16 if args.quick else 22)
for device in devices:
    arrays = [Tensor(numpy.ones(size, dtype)).to(device)
              for dtype in (numpy.float16, numpy.float32)]
    status = float_status.alloc_status(arrays[0])
    clean = float_status.get_status(float_status.check_overflow(status, *arrays))
    spoiled = numpy.ones(size, numpy.float32)
    spoiled[-1] = numpy.nan                     # the very last element
    float_status.check_overflow(status, Tensor(spoiled).to(device))
    after_nan = float_status.get_status(status)
    float_status.check_overflow(status, *arrays)
    still = float_status.get_status(status)
    float_status.clear_status(status)
    print(f"{device}: {size:,} fp16 + fp32 finite -> {clean}; "
          f"NaN in the last element -> {after_nan}; "
          f"clean check after -> {still}; after clear -> {float_status.get_status(status)}")
