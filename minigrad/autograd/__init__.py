"""Reverse-mode automatic differentiation: Function nodes (``function``), the reverse pass over
them (``engine``), PyTorch's ``grad`` and ``backward`` (``backprop``) and MindSpore's functional
``grad``/``value_and_grad``/``GradOperation`` (``api``; ``minigrad.grad`` is MindSpore's,
``minigrad.autograd.grad`` PyTorch's). ``minigrad.autograd.functional`` (vjp, jvp, vhp, hvp,
jacobian, hessian) builds on the ops and is loaded on first access (PEP 562).
"""
import importlib

from minigrad.autograd.api import GradOperation, value_and_grad
from minigrad.autograd.backprop import backward, grad
from minigrad.autograd.function import Function


def __getattr__(name):
    if name != "functional":
        raise AttributeError(f"module 'minigrad.autograd' has no attribute {name!r}")
    return importlib.import_module("minigrad.autograd.functional")
