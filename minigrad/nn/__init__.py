"""Networks, MindSpore style: ``Cell``, layers, initializers, losses and training wrappers."""
from minigrad.nn.cell import Cell, ParameterTuple
from minigrad.nn.init import (initializer, Initializer, Normal, TruncatedNormal, Uniform, HeUniform,
                              HeNormal, XavierUniform, Constant, One, Zero)
from minigrad.nn.layers import (Dense, Flatten, Dropout, Conv2d, BatchNorm1d, BatchNorm2d,
                                LayerNorm, MaxPool2d, AvgPool2d, Embedding, SequentialCell,
                                CellList, ReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax,
                                get_activation)
from minigrad.nn.loss import (LossBase, MSELoss, L1Loss, SoftmaxCrossEntropyWithLogits,
                              CrossEntropyLoss, BCELoss)
from minigrad.nn.wrap import WithLossCell, TrainOneStepCell
from minigrad.nn import utils
from minigrad.nn.distributed import DistributedGradReducer
from minigrad.nn.loss_scale import (TrainOneStepWithLossScaleCell, DynamicLossScaleUpdateCell,
                                   FixedLossScaleUpdateCell)
# MindSpore spells the optimizers and schedules nn.X
from minigrad.optim import (Optimizer, SGD, Momentum, Adam, AdamWeightDecay, RMSProp,
                            LearningRateSchedule,
                            ExponentialDecayLR, NaturalExpDecayLR, InverseDecayLR, CosineDecayLR,
                            PolynomialDecayLR, WarmUpLR, piecewise_constant_lr,
                            exponential_decay_lr, natural_exp_decay_lr, inverse_decay_lr,
                            cosine_decay_lr, polynomial_decay_lr, warmup_lr, THOR, thor)
from minigrad.thor.layers import DenseThor, Conv2dThor, EmbeddingThor
from minigrad.thor.convert_network import ConvertNetUtils
