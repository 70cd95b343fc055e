"""Layers: one file per family (basic, conv, normalization, pooling, activation, embedding,
container, attention, transformer); ``spatial_args`` holds the arguments the 2-D layers share."""
from minigrad.nn.layers.activation import (ReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax,
                                           get_activation)
from minigrad.nn.layers.basic import Dense, Flatten, Dropout
from minigrad.nn.layers.conv import Conv2d
from minigrad.nn.layers.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from minigrad.nn.layers.pooling import MaxPool2d, AvgPool2d
from minigrad.nn.layers.embedding import Embedding
from minigrad.nn.layers.container import SequentialCell, CellList
from minigrad.nn.layers.attention import MultiheadAttention, generate_square_subsequent_mask
from minigrad.nn.layers.transformer import TransformerEncoderLayer, TransformerEncoder
