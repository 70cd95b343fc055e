"""Seeded random generators, one per backend.

Dropout, the initializers and dataset shuffling draw from ``get_rng(xp)``, so one call to
``minigrad.set_seed(n)`` makes all of them reproducible. As MindSpore's ``set_seed`` does, it
also seeds NumPy's global generator (``numpy.random.seed``), so data made with ``numpy.random``
after it repeats too. Without a seed the generators start from fresh OS entropy.
"""
import numpy

_seed = None
_generators = {}  # module name ("numpy" / "cupy") -> Generator
_MAX_SEED = 2 ** 32 - 1


def set_seed(seed):
    """Seed every minigrad generator (NumPy, and CuPy when used) and ``numpy.random`` with ``seed``.

    Generators are re-created lazily from the new seed, so draws after ``set_seed(n)`` repeat
    exactly on every run.

    Raises:
        TypeError: if ``seed`` is not an int.
        ValueError: if ``seed`` is negative or above ``2**32 - 1`` (the range of
            ``numpy.random.seed``); nothing is changed then.
    """
    global _seed
    if isinstance(seed, bool) or not isinstance(seed, (int, numpy.integer)):
        raise TypeError(f"seed must be a non-negative int, got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed}")
    if seed > _MAX_SEED:
        raise ValueError(f"seed must be at most 2**32 - 1 = {_MAX_SEED} (numpy.random.seed's "
                         f"range), got {seed}")
    numpy.random.seed(int(seed))
    _seed = int(seed)
    _generators.clear()


def get_seed():
    """The seed last given to ``set_seed`` (``None`` if it was never called)."""
    return _seed


def get_rng(xp=numpy):
    """The generator for array module ``xp``: a ``numpy.random.Generator`` or its CuPy twin."""
    gen = _generators.get(xp.__name__)
    if gen is None:
        gen = _generators[xp.__name__] = xp.random.default_rng(_seed)
    return gen
