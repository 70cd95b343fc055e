"""Dataset-wide settings: ``minigrad.dataset.config`` (the shuffling seed), MindSpore's
``dataset.config``."""
import numpy

from minigrad import random as mg_random


class _Config:
    """Dataset-wide settings (``minigrad.dataset.config``); MindSpore's ``dataset.config``."""

    def __init__(self):
        self._seed = None

    def set_seed(self, seed):
        """Seed the shuffling of datasets built from now on (``None``: fresh entropy each time).

        Raises:
            ValueError: if ``seed`` is not a non-negative int.
        """
        if seed is not None and (not isinstance(seed, (int, numpy.integer)) or isinstance(seed, bool)
                                 or seed < 0):
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
        self._seed = None if seed is None else int(seed)

    def get_seed(self):
        return self._seed


config = _Config()


def new_generator():
    """A Generator for one shuffling node: from the dataset seed, else ``minigrad.set_seed``'s."""
    seed = config.get_seed()
    return numpy.random.default_rng(mg_random.get_seed() if seed is None else seed)
