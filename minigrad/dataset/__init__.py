"""Datasets, MindSpore style: ``NumpySlicesDataset(data).shuffle(n).batch(32)``; ``load_digits``;
``MnistDataset`` and ``Cifar10Dataset`` from their files; image transforms in ``vision``.

- ``numpy_slices``: the in-memory source; ``generator``: rows from Python code
  (``GeneratorDataset``); ``sampling``: the order of a source with numbered rows; ``pipeline``:
  the ``Dataset`` base and its shuffle/repeat/map/batch nodes; ``iterator``: what the
  ``create_*_iterator`` methods return; ``settings``: ``config``, the shuffling seed;
  ``digits``: scikit-learn's digits, split and normalised; ``mnist``, ``cifar10``: the readers
  of MNIST's IDX files and CIFAR-10's binary batches, over ``files`` (whole-file reads, .gz);
  ``vision``: image transforms (``Rescale``, ``Normalize``, ``HWC2CHW``, ``RandomCrop``,
  ``RandomHorizontalFlip``); ``transforms``: ``TypeCast``.
"""
from minigrad.dataset.settings import config
from minigrad.dataset.pipeline import (Dataset, ShuffleDataset, RepeatDataset, MapDataset,
                                       BatchDataset)
from minigrad.dataset.numpy_slices import NumpySlicesDataset
from minigrad.dataset.generator import GeneratorDataset
from minigrad.dataset.digits import load_digits
from minigrad.dataset.mnist import MnistDataset
from minigrad.dataset.cifar10 import Cifar10Dataset
from minigrad.dataset import transforms, vision
