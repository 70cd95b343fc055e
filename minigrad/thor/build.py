"""MindSpore's ``nn.thor`` (convert the network, then build ``THOR``) and the converter registry."""
from minigrad.thor.arguments import check_seed_arguments
from minigrad.thor.optimizer import THOR

_CONVERTERS = []  # filled by minigrad.nn (the layer above), which owns the THOR layers


def thor(net, learning_rate, damping, momentum, weight_decay=0.0, loss_scale=1.0, batch_size=32,
         use_nesterov=False, decay_filter=lambda x: x.name not in [], split_indices=None,
         enable_clip_grad=False, frequency=100, **options):
    """MindSpore's ``nn.thor``: convert ``net`` to THOR layers in place (``ConvertNetUtils``)
    and return a ``THOR`` optimizer over it. ``options`` are THOR's extra keyword arguments.

    Raises:
        TypeError / ValueError: as ``THOR`` (checked after the conversion, which only swaps
            layers for equivalent ones).
    """
    if not _CONVERTERS:
        raise RuntimeError("thor: no network converter is registered (import minigrad.nn)")
    check_seed_arguments(net, learning_rate, momentum, weight_decay, loss_scale, use_nesterov,
                         decay_filter, frequency)  # before the network is changed
    _CONVERTERS[-1](net)
    return THOR(net, learning_rate, damping, momentum, weight_decay, loss_scale, batch_size,
                use_nesterov, decay_filter, split_indices, enable_clip_grad, frequency, **options)


def register_converter(convert):
    """Register ``convert(net)`` (``nn.ConvertNetUtils().convert_to_thor_net``) for ``thor``."""
    _CONVERTERS.append(convert)
