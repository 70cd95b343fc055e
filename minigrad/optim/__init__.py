"""Optimizers and learning-rate schedules (MindSpore API; also usable Torch style).

``nn`` re-exports the optimizers and schedules (``nn.Momentum``, ``nn.Adam``, ``nn.CosineDecayLR``,
...).
"""
from minigrad.optim.adam import Adam, AdamWeightDecay
from minigrad.optim.lr_schedule import (
                                        CosineDecayLR,
                                        ExponentialDecayLR,
                                        InverseDecayLR,
                                        LearningRateSchedule,
                                        NaturalExpDecayLR,
                                        PolynomialDecayLR,
                                        WarmUpLR,
                                        cosine_decay_lr,
                                        exponential_decay_lr,
                                        inverse_decay_lr,
                                        natural_exp_decay_lr,
                                        piecewise_constant_lr,
                                        polynomial_decay_lr,
                                        warmup_lr,
)
from minigrad.optim.momentum import Momentum
from minigrad.optim.optimizer import Optimizer
from minigrad.optim.param_groups import default_decay_filter
from minigrad.optim.rmsprop import RMSProp
from minigrad.optim.sgd import SGD
from minigrad.thor.build import thor
from minigrad.thor.optimizer import THOR
from minigrad.thor.report import LayerReport, ThorReport

__all__ = ["Optimizer", "default_decay_filter", "SGD", "Momentum", "Adam", "AdamWeightDecay",
           "RMSProp",
           "LearningRateSchedule", "ExponentialDecayLR", "NaturalExpDecayLR", "InverseDecayLR",
           "CosineDecayLR",
           "PolynomialDecayLR", "WarmUpLR", "piecewise_constant_lr", "exponential_decay_lr",
           "natural_exp_decay_lr", "inverse_decay_lr", "cosine_decay_lr", "polynomial_decay_lr",
           "warmup_lr",
           "THOR", "thor", "ThorReport", "LayerReport"]
