"""Test tools: the gradient checker and its per-dtype tolerance table."""
from minigrad.testing.gradcheck import check_backward, numerical_grad, tolerance
