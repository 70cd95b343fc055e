"""The arguments the 2-D layers share: ``data_format`` and the ``pad_mode``/``padding`` pair."""
from minigrad._checks import check_in, check_int_tuple


def check_data_format(value):
    """A 2-D layer's ``data_format``: "NCHW" (MindSpore's default). "NHWC" is a GPU-only layout in
    MindSpore; minigrad computes NCHW only, so it is refused like any other value."""
    return check_in("data_format", value, ("NCHW",))


def check_pad_mode(value, modes):
    """``pad_mode`` (case-insensitive, as MindSpore) lowered, one of ``modes``; a non-str
    (a Tensor, a number) is a TypeError."""
    return check_in("pad_mode", value, modes, fold=str.lower)


def check_pad_mode_padding(pad_mode, padding):
    """Validate Conv2d's ``pad_mode`` and ``padding``; return (pad_mode, padding as a 4-tuple).

    ``padding`` (an int or (top, bottom, left, right)) may be non-zero only with
    ``pad_mode="pad"``.
    """
    pad_mode = check_pad_mode(pad_mode, ("same", "valid", "pad"))
    pads = check_int_tuple("padding", padding, 4, low=0)
    if pad_mode != "pad" and any(pads):
        raise ValueError(f"padding must be 0 when pad_mode is {pad_mode!r}, got {padding!r} "
                         f"(use pad_mode='pad' for explicit padding)")
    return pad_mode, pads
