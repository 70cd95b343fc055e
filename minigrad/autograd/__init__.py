"""Reverse-mode automatic differentiation: Function nodes, the engine, functional APIs."""
from minigrad.autograd.api import GradOperation, grad, value_and_grad
from minigrad.autograd.function import Function
