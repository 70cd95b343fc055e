"""``python -m minigrad.bench kernels``: compile every CUDA kernel of minigrad through CuPy, as
the first call of a kernel would, and report what the compiler made of each: registers, local
memory (spills), static shared memory, the binary's architecture. A GPU run does this first, so
that one compile problem (NVRTC, headers) shows as one clear line instead of failing every test.
"""
import sys

from minigrad import _native, backend
from minigrad.bench import report

COLUMNS = ["source", "kernel", "num_regs", "local_size_bytes", "shared_size_bytes",
           "max_threads_per_block", "binary_version"]


def add_arguments(parser):
    parser.add_argument("--json", help="write the table, CuPy's and NVRTC's versions and the "
                                       "options here")


def run(args):
    """Compile and report; the exit code (0, 1 a compile failed, 2 no GPU)."""
    if not backend.CUDA_AVAILABLE:
        print(f"kernels: compiling through CuPy needs CuPy and a GPU: "
              f"{backend.CUPY_IMPORT_ERROR}", file=sys.stderr)
        return 2
    cupy = backend.cupy
    result = {"benchmark": "minigrad.bench kernels", "cupy": cupy.__version__,
              "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
              "compute_capability": cupy.cuda.Device().compute_capability,
              "options": list(_native.CUDA_OPTIONS), "kernels": [], "error": None}
    for source, names in _native.CUDA_SOURCES.items():
        try:
            _native.cuda_module(source).compile()
            for name in names:
                attributes = _native.cuda_function(name, source).attributes
                result["kernels"].append({"source": source, "kernel": name, **{
                    key: attributes.get(key) for key in COLUMNS[2:]}})
        except Exception as error:  # CuPy raises CompileException, CUDADriverError, ...
            first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            result["error"] = f"{source}: {type(error).__name__}: {first}"
            break
    report.print_table(result["kernels"], COLUMNS)
    if args.json:
        report.write_json(args.json, result)
    if result["error"]:
        print(f"kernels: compiling through CuPy (NVRTC {result['nvrtc']}) failed: "
              f"{result['error']}", file=sys.stderr)
        return 1
    spilled = [k["kernel"] for k in result["kernels"] if k["local_size_bytes"]]
    if spilled:
        print(f"kernels: local memory (spills) in {spilled}", file=sys.stderr)
    return 0
