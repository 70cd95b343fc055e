"""Datasets, MindSpore style: ``NumpySlicesDataset(data).shuffle(n).batch(32)``, and ``load_digits``."""
from minigrad.dataset.numpy_slices import (Dataset, NumpySlicesDataset, ShuffleDataset, MapDataset,
                                           BatchDataset, config)
from minigrad.dataset.digits import load_digits
