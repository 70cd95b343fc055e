"""Dataset-wide settings: ``minigrad.dataset.config`` (the shuffling seed), MindSpore's
``dataset.config``."""
import numpy

from minigrad import random as mg_random
from minigrad._checks import check_non_negative_int


class _Config:
    """Dataset-wide settings (``minigrad.dataset.config``); MindSpore's ``dataset.config``."""

    def __init__(self):
        self._seed = None

    def set_seed(self, seed):
        """Seed the shuffling of datasets built from now on (``None``: fresh entropy each time).

        Raises:
            TypeError: if ``seed`` is neither an int nor None.
            ValueError: if it is negative.
        """
        self._seed = check_non_negative_int("seed", seed, allow_none=True)

    def get_seed(self):
        return self._seed


config = _Config()


def new_generator():
    """A Generator for one shuffling node: from the dataset seed, else ``minigrad.set_seed``'s."""
    seed = config.get_seed()
    return numpy.random.default_rng(mg_random.get_seed() if seed is None else seed)
