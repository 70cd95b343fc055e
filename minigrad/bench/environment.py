"""Where a benchmark ran: the machine and its load (``machine``, ``warn_if_busy``), and for a GPU
the device, its rated bandwidth, clocks and the versions of everything on the timing path
(``gpu_environment``). Every benchmark of minigrad records these in its JSON.
"""
import os
import platform
import shutil
import subprocess
import sys

BUSY_LOAD_PER_CORE = 0.5  # 1-minute load average per core above which timings are suspect
_load_at_start = None
_SMI_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw",
               "temperature.gpu", "pstate")


def load_average():
    """``os.getloadavg()`` (1, 5 and 15 minutes) as a list, or None where the OS has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def blas_info():
    """The BLAS libraries loaded in this process and their thread counts, from threadpoolctl
    (``pip install threadpoolctl``); without it, what NumPy was built against and the thread
    variables of the environment."""
    threads_env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                              "MKL_NUM_THREADS") if k in os.environ}
    try:
        import threadpoolctl
    except ImportError:
        import numpy
        config = getattr(numpy, "show_config", None)
        libraries = None
        try:
            libraries = config(mode="dicts").get("Build Dependencies", {}).get("blas")
        except (TypeError, AttributeError):
            pass
        return {"source": "numpy build (threadpoolctl not installed)", "blas": libraries,
                "env": threads_env}
    pools = [{key: pool.get(key) for key in ("internal_api", "version", "num_threads",
                                             "threading_layer", "filepath")}
             for pool in threadpoolctl.threadpool_info() if pool.get("user_api") == "blas"]
    return {"source": f"threadpoolctl {threadpoolctl.__version__}", "blas": pools,
            "env": threads_env}


def warn_if_busy(threshold=BUSY_LOAD_PER_CORE, stream=None):
    """Record the load average at the start of a benchmark and warn (on stderr) when the machine
    is busy: a 1-minute load above ``threshold`` per core makes timings, and even ratios of two
    timings taken while another process competes for the cores, unreliable.

    Returns:
        Whether the machine was busy.
    """
    global _load_at_start
    _load_at_start = load_average()
    cores = os.cpu_count() or 1
    busy = _load_at_start is not None and _load_at_start[0] > threshold * cores
    if busy:
        print(f"warning: load average {_load_at_start[0]} on {cores} cores (above "
              f"{threshold} per core): other processes compete for the CPU, so these timings "
              f"are not comparable with a quiet machine's; rerun when it is idle",
              file=stream or sys.stderr, flush=True)
    return busy


def machine():
    """Where and under what load the benchmark ran (recorded in the JSON): versions, CPU count,
    the load average at the start (``warn_if_busy``) and at the end, and the BLAS library and
    its thread count."""
    import numpy
    cores = os.cpu_count() or 1
    start = _load_at_start
    end = load_average()
    busiest = max((v[0] for v in (start, end) if v is not None), default=None)
    return {"python": sys.version.split()[0], "numpy": numpy.__version__,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpu_count": cores,
            "load_average_start": start, "load_average_end": end,
            "busy": busiest is not None and busiest > BUSY_LOAD_PER_CORE * cores,
            "blas": blas_info()}


def gpu_clocks():
    """What ``nvidia-smi`` says of the current GPU now (clocks in MHz, power in W, temperature,
    performance state), or ``{"error": why}``."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"error": "nvidia-smi not found"}
    try:
        result = subprocess.run([smi, f"--query-gpu={','.join(_SMI_FIELDS)}",
                                 "--format=csv,noheader,nounits", "-i",
                                 os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as error:
        return {"error": f"nvidia-smi: {error}"}
    if result.returncode != 0:
        return {"error": f"nvidia-smi: {result.stderr.strip() or result.stdout.strip()}"}
    values = [v.strip() for v in result.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(_SMI_FIELDS, values))


def rated_bandwidth(memory_clock_khz, bus_width_bits):
    """Bytes per second the memory interface moves at its rated clock: clock x width x 2 (two
    transfers a clock), as nvbench's "BWUtil" counts it. None if either is unknown."""
    if not memory_clock_khz or not bus_width_bits:
        return None
    return memory_clock_khz * 1e3 * bus_width_bits / 8 * 2


def device_attribute(cupy, name):
    """The current GPU's ``cudaDevAttr<name>`` (e.g. ``"L2CacheSize"``), or None where this
    CUDA does not know it."""
    runtime = cupy.cuda.runtime
    try:
        return runtime.deviceGetAttribute(getattr(runtime, "cudaDevAttr" + name),
                                          cupy.cuda.Device().id)
    except (AttributeError, runtime.CUDARuntimeError):
        return None


def gpu_environment(cupy, torch=None):
    """The current GPU and the software on the timing path, as a dict for the JSON."""
    device = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
    info = {
        "gpu": name.decode() if isinstance(name, bytes) else name,
        "compute_capability": device.compute_capability,
        "multiprocessors": device_attribute(cupy, "MultiProcessorCount"),
        "l2_bytes": device_attribute(cupy, "L2CacheSize"),
        "memory_bytes": device.mem_info[1],
        "memory_clock_khz": device_attribute(cupy, "MemoryClockRate"),
        "memory_bus_bits": device_attribute(cupy, "GlobalMemoryBusWidth"),
        "driver": cupy.cuda.runtime.driverGetVersion(),
        "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
        "cupy": cupy.__version__,
        "ecc": device_attribute(cupy, "EccEnabled"),
    }
    info["rated_bandwidth_gb_s"] = _gb(rated_bandwidth(info["memory_clock_khz"],
                                                       info["memory_bus_bits"]))
    if torch is not None:
        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda)
    return info


def cpu_environment(torch=None):
    """The CPU side of the same record: the host kernels in use and the peer's threads."""
    from minigrad import _native
    lib = _native.host_library()
    info = {"minigrad_host_kernels": "native" if lib is not None
            else f"numpy fallback ({_native.host_library_error()})"}
    if lib is not None:
        info["minigrad_host_threads"] = _native.host_threads()
    if torch is not None:
        info.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    return info


def _gb(value):
    return None if value is None else round(value / 1e9, 1)
