"""Running statistics a forward pass writes (BatchNorm's ``moving_mean``/``moving_variance``),
and how a skipped loss-scaled step takes them back.

A batch holding inf or NaN makes the loss non-finite and the step is skipped, but the forward
pass has already folded that batch into the moving statistics: every later evaluation would be
NaN. So each write of a running statistic first records the value it replaces (once per
Parameter until the next ``commit``), and the loss-scaling faces end every step with
``commit()`` (the step was applied) or ``rollback()`` (it was skipped: the statistics are
restored bit for bit, in place). The faces that do so: ``nn.TrainOneStepWithLossScaleCell``
(and ``Model(amp_level="O2")``), ``amp.GradScaler`` (``step`` skipped: rollback; ``update``:
commit) and ``mixed_precision.LossScaleOptimizer.apply_gradients``. No peer framework does this;
it is minigrad's rule that a skipped step leaves every piece of state as it was.

The record is per thread and holds one copy of each statistic written since the last commit;
a loop with no loss scaling never rolls back, and its records only ever hold that one copy.
"""
import threading
import weakref


class _Record(threading.local):
    def __init__(self):
        self.saved = {}  # id(param) -> (weak reference to param, the array it held)


_record = _Record()


def save(*params):
    """Remember the current values of ``params`` (Parameters about to be written in place),
    unless they were saved since the last ``commit``."""
    saved = _record.saved
    for p in params:
        key = id(p)
        entry = saved.get(key)
        if entry is None or entry[0]() is not p:
            saved[key] = (weakref.ref(p), p.data.copy())


def commit():
    """Keep every statistic written so far: the step they belong to was applied."""
    _record.saved.clear()


def rollback():
    """Restore every statistic saved since the last ``commit``, in place (same arrays, same
    bits, ``version`` unchanged: nothing else saw the skipped values), then forget them."""
    for ref, old in _record.saved.values():
        param = ref()
        if param is not None and param.data.shape == old.shape:
            param.data[...] = old
    _record.saved.clear()
