"""Reverse-mode automatic differentiation: Function nodes and the reverse pass over them
(``function``), and the functional APIs (``api``)."""
from minigrad.autograd.api import GradOperation, grad, value_and_grad
from minigrad.autograd.function import Function
