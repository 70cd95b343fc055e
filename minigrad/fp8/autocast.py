"""``fp8_autocast``: the context in which Dense and Conv2d compute their GEMMs in FP8.

Transformer Engine's face::

    recipe = fp8.DelayedScaling(fp8_format="HYBRID", amax_history_len=16)
    with fp8.fp8_autocast(enabled=True, fp8_recipe=recipe):
        loss = loss_fn(net(x), y)
    loss.backward()

Inside it each ``nn.Dense`` and ``nn.Conv2d`` quantizes its input and weight (forward format)
and its output's gradient (backward format) under the recipe (``minigrad.fp8.gemm``), keeping
one ``ScalingState`` per tensor on the layer. Delayed scaling updates its scales when a step's
casts are done: on leaving the context (the forward casts, and the backward ones when backward
ran inside it) and on entering the next one (the backward casts of a backward run after the
context closed). Only the states cast since the last update are updated.
"""
from minigrad._checks import check_bool, check_type
from minigrad.fp8.recipes import DelayedScaling, Recipe

_ACTIVE = []    # the recipes of the open contexts, innermost last (None: disabled)
_PENDING = {}   # id(state) -> (recipe, state): cast since the last update
_STEP = {}      # id(state) -> state: cast since the last step report (take_step_stats)


def get_fp8_recipe():
    """The recipe of the innermost open ``fp8_autocast`` (None outside, or when disabled)."""
    return _ACTIVE[-1] if _ACTIVE else None


def mark_cast(recipe, state):
    """Remember that ``state`` was cast under ``recipe``, for the next ``update_scales`` and
    the next step report."""
    _PENDING[id(state)] = (recipe, state)
    _STEP[id(state)] = state


def take_step_stats():
    """``{name: stats}`` of the FP8 tensors cast since the last call (the step report's FP8
    part; None when none was): each tensor's last ``QuantStats.row()`` with its running
    ``saturated`` count."""
    if not _STEP:
        return None
    states = list(_STEP.values())
    _STEP.clear()
    return {state.name: {**state.last.row(), "saturated": state.saturated} for state in states}


def update_scales():
    """Run the recipe's end-of-step update on every state cast since the last update."""
    while _PENDING:
        _, (recipe, state) = _PENDING.popitem()
        recipe.update(state)


class fp8_autocast:
    """Run Dense and Conv2d GEMMs in FP8 inside the ``with`` block.

    Args:
        enabled: default True; False runs the block in the layers' own precision (a nested
            ``fp8_autocast(enabled=False)`` turns FP8 off for its block).
        fp8_recipe: a ``Recipe`` (``DelayedScaling``, ``CurrentScaling``, ``TensorwiseScaling``,
            ``RowwiseScaling``, ``MXFP8BlockScaling``). Default None: ``DelayedScaling()``
            (Transformer Engine's default: HYBRID, history 1024, ``"max"``, margin 0).

    Raises:
        TypeError: for a non-bool ``enabled`` or a ``fp8_recipe`` that is not a Recipe.
    """

    def __init__(self, enabled=True, fp8_recipe=None):
        self.enabled = check_bool("enabled", enabled, owner="fp8_autocast")
        if fp8_recipe is None:
            fp8_recipe = DelayedScaling()
        self.fp8_recipe = check_type("fp8_recipe", fp8_recipe, Recipe, expected="a Recipe",
                                     owner="fp8_autocast")

    def __enter__(self):
        update_scales()
        _ACTIVE.append(self.fp8_recipe if self.enabled else None)
        return self

    def __exit__(self, *exc):
        _ACTIVE.pop()
        update_scales()
        return False
