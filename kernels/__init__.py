"""Raw CUDA kernel sources (``*.cu``) and the host shim (``*.h``) that compiles them with a C++
compiler; shipped as package data and loaded by ``minigrad.amp.kernels``."""
