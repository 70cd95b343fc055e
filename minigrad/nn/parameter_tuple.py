"""``ParameterTuple``: the tuple of Parameters optimizers hold; a Cell registers one assigned to
an attribute."""
from minigrad._checks import check_items, check_relation, check_type
from minigrad.parameter import Parameter
from minigrad.tensor import Tensor


class ParameterTuple(tuple):
    """A tuple of Parameters (what optimizers hold); a Cell attribute of this type is registered.

    Raises:
        TypeError: if ``iterable`` is a str or not iterable, or an element is not a Parameter.
    """

    def __new__(cls, iterable=()):
        items = check_items("iterable", iterable, Parameter,
                            expected="an iterable of Parameters", owner="ParameterTuple")
        return super().__new__(cls, items)

    def clone(self, prefix, init="same"):
        """New Parameters shaped like these, named ``prefix + "." + name`` (e.g. optimizer moments).

        ``init`` is ``"same"`` (copy the values) or anything ``nn.initializer`` accepts ("zeros").

        Raises:
            TypeError / ValueError: for a ``prefix`` that is not a non-empty str, or an ``init``
                ``nn.initializer`` refuses.
        """
        from minigrad.nn.init import initializer
        check_type("prefix", prefix, str, owner="ParameterTuple.clone")
        check_relation("prefix", prefix, bool(prefix), "a non-empty str",
                       owner="ParameterTuple.clone")
        clones = []
        for p in self:
            if isinstance(init, str) and init == "same":
                value = Tensor(p.data.copy(), device=p.device)
            else:
                value = Tensor(initializer(init, p.shape, p.dtype), device=p.device)
            clones.append(Parameter(value, name=f"{prefix}.{p.name}",
                                    requires_grad=p.requires_grad))
        return ParameterTuple(clones)
