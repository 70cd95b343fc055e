"""The environment record's pieces that do not need a GPU: the rated bandwidth, a device
attribute this CUDA lacks, nvidia-smi's absence, and the CPU side."""
import types

import pytest

from minigrad.bench import environment


def test_rated_bandwidth_is_clock_times_width_times_two():
    # an H200's HBM3e: 3201 MHz, 6144 bits -> 4.92 TB/s (the datasheet says 4.8)
    assert environment.rated_bandwidth(3_201_000, 6144) == pytest.approx(4.917e12, rel=1e-3)
    assert environment.rated_bandwidth(None, 6144) is None


def test_a_device_attribute_this_cuda_lacks_is_none():
    class CUDARuntimeError(Exception):
        pass

    def get(attribute, device):
        if attribute == 2:
            raise CUDARuntimeError("invalid value")
        return 132
    runtime = types.SimpleNamespace(cudaDevAttrMultiProcessorCount=1, cudaDevAttrEccEnabled=2,
                                    CUDARuntimeError=CUDARuntimeError, deviceGetAttribute=get)
    cupy = types.SimpleNamespace(cuda=types.SimpleNamespace(
        runtime=runtime, Device=lambda: types.SimpleNamespace(id=0)))
    assert environment.device_attribute(cupy, "MultiProcessorCount") == 132
    assert environment.device_attribute(cupy, "EccEnabled") is None
    assert environment.device_attribute(cupy, "NoSuchAttribute") is None


def test_clocks_without_nvidia_smi_say_so(monkeypatch):
    monkeypatch.setattr(environment.shutil, "which", lambda name: None)
    assert environment.gpu_clocks() == {"error": "nvidia-smi not found"}


def test_the_cpu_side_names_the_host_kernels():
    info = environment.cpu_environment()
    assert info["minigrad_host_kernels"] == "native" or info["minigrad_host_kernels"].startswith(
        "numpy fallback")
