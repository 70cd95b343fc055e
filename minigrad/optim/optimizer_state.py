"""An optimizer's ``state_dict`` and ``load_state_dict``: its step count, fixed learning rates,
per-parameter state and fp16 masters as a plain dict of NumPy arrays and Python numbers."""
import numpy

from minigrad import backend
from minigrad._checks import check_non_negative_int, check_relation, check_type
from minigrad.optim.param_groups import preview
from minigrad.tensor import Tensor


def state_dict(optimizer):
    """A plain dict of ``optimizer``'s state: NumPy arrays and Python numbers (copies).

    Keys: ``"global_step"``; the name of each fixed learning rate's Parameter
    (``"learning_rate"``, ``"learning_rate_group_<k>"``), a 0-d float32 array, so that a rate
    changed with ``set_data`` survives a checkpoint as in MindSpore (and PyTorch's
    ``param_groups``); ``"<state name>.<parameter name>"`` for each state array (e.g.
    ``"moments.fc1.weight"``); ``"master.<parameter name>"`` for each fp16 master weight.
    Unnamed parameters are called ``param<i>``. (Per-step lists and schedules follow
    ``global_step``.)
    """
    result = {"global_step": optimizer.global_step}
    for rate in optimizer._fixed_rates():
        result[rate.name] = numpy.array(backend.as_numpy(rate.data))
    result.update(optimizer.slots.items(optimizer._parameter_keys()))
    return result


def _global_step(state, owner):
    check_relation("state_dict", state, "global_step" in state, "a dict with 'global_step'",
                   owner=owner)
    step = state["global_step"]
    step = step.item() if isinstance(step, numpy.ndarray) and step.size == 1 else step
    return check_non_negative_int("state_dict['global_step']", step, owner=owner)


def _rate(key, value, owner):
    rate = numpy.asarray(value.asnumpy() if isinstance(value, Tensor) else value)
    ok = rate.shape == () and rate.dtype.kind == "f" and rate >= 0 and numpy.isfinite(rate)
    check_relation(f"state_dict[{key!r}]", rate, ok, "a finite float >= 0 of shape ()",
                   owner=owner)
    return numpy.float32(rate)


def load_state_dict(optimizer, state):
    """Restore what ``state_dict(optimizer)`` returned; everything is checked before anything
    changes.

    Parameters with no state in ``state`` start afresh (their state is made at their next
    update, their master from the parameter); a fixed learning rate absent from it keeps its
    value (a dict that does not record the rate).

    Raises:
        TypeError: ``state`` is not a dict, or ``global_step`` is not an int.
        ValueError: a missing ``global_step``, an unknown key, a parameter with only part of its
            state, or an array whose shape or dtype does not fit (naming key, both shapes/dtypes).
    """
    owner = f"{type(optimizer).__name__}.load_state_dict"
    check_type("state_dict", state, dict, owner=owner)
    step = _global_step(state, owner)
    keys = optimizer._parameter_keys()
    names = set(keys)
    slots = set(optimizer.state_names) | {"master"}
    rates = {rate.name: rate for rate in optimizer._fixed_rates()}
    new_rates, entries = {}, {}
    for key, value in state.items():
        if key == "global_step":
            continue
        if key in rates:
            new_rates[key] = _rate(key, value, owner)
            continue
        slot, _, name = key.partition(".")
        check_relation("state_dict key", key, slot in slots and name in names,
                       f"'global_step', a learning rate in {sorted(rates)}, or "
                       f"'<slot>.<parameter name>' with slot in {sorted(slots)} and a name in "
                       f"{preview(keys)}", owner=owner)
        entries[(slot, name)] = value
    states, masters = optimizer.slots.checked(entries, keys, optimizer.state_names, owner)
    # all checked: assign
    optimizer.slots.load(states, masters)
    for key, rate in new_rates.items():
        rates[key].set_data(rate)
    optimizer.global_step = step
