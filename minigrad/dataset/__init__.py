"""Datasets, MindSpore style: ``NumpySlicesDataset(data).shuffle(n).batch(32)``; ``load_digits``.

- ``numpy_slices``: the in-memory source; ``generator``: rows from Python code
  (``GeneratorDataset``); ``sampling``: the order of a source with numbered rows; ``pipeline``:
  the ``Dataset`` base and its shuffle/repeat/map/batch nodes; ``iterator``: what the
  ``create_*_iterator`` methods return; ``settings``: ``config``, the shuffling seed;
  ``digits``: scikit-learn's digits, split and normalised.
"""
from minigrad.dataset.settings import config
from minigrad.dataset.pipeline import (Dataset, ShuffleDataset, RepeatDataset, MapDataset,
                                       BatchDataset)
from minigrad.dataset.numpy_slices import NumpySlicesDataset
from minigrad.dataset.generator import GeneratorDataset
from minigrad.dataset.digits import load_digits
