"""Test tools: the gradient checker, its per-dtype tolerance table, and op-test helpers."""
from minigrad.testing.gradcheck import (
    check_backward,
    check_double_backward,
    numerical_grad,
    tolerance,
)
from minigrad.testing.helpers import assert_forward, noncontiguous
