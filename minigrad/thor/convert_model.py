"""``ConvertModelUtils`` (MindSpore's name): a ``Model`` that trains with THOR.

MindSpore's ``ModelThor`` switches the layers between a recording step and ``frequency - 1``
reuse steps; in minigrad the ``THOR`` optimizer tells its layers what to record before every
step, so the plain ``Model`` (every AMP level, every callback, ``eval`` included) trains a THOR
network as it is.
"""
from minigrad._checks import check_type
from minigrad.optim.optimizer import Optimizer
from minigrad.thor.optimizer import THOR
from minigrad.train.model import Model


class ConvertModelUtils:
    """Build the ``Model`` of a THOR run (see the module docstring)."""

    @staticmethod
    def convert_to_thor_model(model, network, loss_fn=None, optimizer=None, metrics=None,
                              amp_level="O0", loss_scale_manager=None, keep_batchnorm_fp32=False):
        """A ``Model`` over ``network``, ``loss_fn`` and the THOR ``optimizer`` with these AMP
        settings; ``model`` itself when ``optimizer`` is not THOR (as MindSpore).

        With ``loss_fn`` None, ``network`` is the network with its loss, or (``optimizer`` too
        given but ``network`` a training cell such as ``TrainOneStepCell``) the train step.

        Raises:
            TypeError: for a ``model`` that is not a Model or an ``optimizer`` that is not an
                Optimizer (or None).
            TypeError / ValueError: as ``Model`` for the other arguments.
        """
        owner = "convert_to_thor_model"
        check_type("model", model, Model, owner=owner)
        if not isinstance(optimizer, THOR):
            if optimizer is not None:
                check_type("optimizer", optimizer, Optimizer,
                           expected="an Optimizer (THOR to convert) or None", owner=owner)
            return model
        if loss_fn is None and hasattr(network, "optimizer") and network.optimizer is optimizer:
            return Model(network)  # already a training cell around the THOR optimizer
        return Model(network, loss_fn, optimizer, metrics=metrics, amp_level=amp_level,
                     loss_scale_manager=loss_scale_manager,
                     keep_batchnorm_fp32=keep_batchnorm_fp32)
