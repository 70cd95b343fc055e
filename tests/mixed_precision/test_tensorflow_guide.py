"""TensorFlow's "Mixed precision" guide (tensorflow.org/guide/mixed_precision, the TF 2.1-2.3
edition with ``Policy(name, loss_scale=)``) and the examples of the Keras ``LossScaleOptimizer``
docstring, ported.

minigrad's TensorFlow face is ``minigrad.mixed_precision`` (policies, loss scales,
``LossScaleOptimizer``), not ``tf.keras.layers``: the ports build their layers with minigrad's
cells (``nn.Dense(in, out)`` needs its input size; ``dense.weight`` is Keras's ``kernel``; a
layer's ``dtype="float32"`` is ``.to_float(float32)``), train with ``Model`` (Keras's ``fit``)
or a ``value_and_grad`` loop (``GradientTape``), on the digits in place of MNIST. Each checks
what the guide or docstring prints."""
import numpy as np
import pytest

import minigrad
from minigrad import Model, Parameter, Tensor, mixed_precision, nn, ops
from minigrad.autograd import value_and_grad
from minigrad.dataset import NumpySlicesDataset, load_digits
from minigrad.train import Accuracy

pytestmark = pytest.mark.usefixtures("one_blas_thread")  # whole training runs


@pytest.fixture
def policy():
    policy = mixed_precision.Policy('mixed_float16')
    mixed_precision.set_global_policy(policy)
    yield policy
    mixed_precision.set_global_policy('float32')


def test_setting_the_dtype_policy(policy):
    # Equivalent to the two lines above
    mixed_precision.set_global_policy('mixed_float16')
    assert 'Compute dtype: %s' % policy.compute_dtype == 'Compute dtype: float16'
    assert 'Variable dtype: %s' % policy.variable_dtype == 'Variable dtype: float32'


def _build(num_units=64):
    """The guide's "Building the model", the layers created under the global policy."""
    dense1 = nn.Dense(64, num_units, activation='relu')            # Keras: inputs of shape (784,)
    dense2 = nn.Dense(num_units, num_units, activation='relu')
    dense_logits = nn.Dense(num_units, 10)
    softmax = nn.Softmax().to_float(minigrad.float32)               # dtype='float32'
    return dense1, dense2, dense_logits, softmax


def test_building_the_model(policy):
    dense1, dense2, dense_logits, softmax = _build()
    inputs = Tensor(np.ones((2, 64), np.float32))
    x = dense1(inputs)
    x = dense2(x)
    assert str(dense1.dtype_policy) == '<Policy "mixed_float16">'
    assert 'x.dtype: %s' % x.dtype.name == 'x.dtype: float16'
    # 'kernel' is dense1's variable
    assert 'dense1.kernel.dtype: %s' % dense1.weight.dtype.name == 'dense1.kernel.dtype: float32'

    # INCORRECT: softmax and model output will be float16, when it should be float32
    outputs = nn.Dense(64, 10, activation='softmax')(x)
    assert 'Outputs dtype: %s' % outputs.dtype.name == 'Outputs dtype: float16'

    # CORRECT: softmax and model output are float32
    x = dense_logits(x)
    outputs = softmax(x)
    assert 'Outputs dtype: %s' % outputs.dtype.name == 'Outputs dtype: float32'

    # The linear activation is an identity function. So this simply casts 'outputs'
    # to float32. In this particular case, 'outputs' is already float32 so this is a
    # no-op.
    outputs = ops.cast(outputs, minigrad.float32)
    assert outputs.dtype == minigrad.float32


def test_underflow_and_overflow(policy):
    x = Tensor(256, dtype='float16')
    assert (x ** 2).numpy() == np.inf  # Overflow
    x = Tensor(1e-5, dtype='float16')
    assert (x ** 2).numpy() == 0.0  # Underflow


def test_choosing_the_loss_scale(policy):
    loss_scale = policy.loss_scale
    assert ('Loss scale: %s' % loss_scale).startswith(
        'Loss scale: DynamicLossScale(current_loss_scale=32768.0, num_good_steps=0')
    new_policy = mixed_precision.Policy('mixed_float16', loss_scale=1024)
    assert str(new_policy.loss_scale) == 'FixedLossScale(1024.0)'


def _digits():
    (x_train, y_train), (x_test, y_test) = load_digits()
    return x_train, y_train, x_test, y_test


def test_training_the_model_with_model_fit(policy):
    """Keras's compile + fit; ``Model`` wraps the optimizer for loss scaling under the policy, as
    ``fit`` does. Edits: the loss takes the logits (``CrossEntropyLoss``; Keras's
    sparse_categorical_crossentropy takes the softmax output), RMSprop is ``nn.RMSProp`` with
    Keras's learning rate and epsilon, the batch is 32 (8192 is more than the digits)."""
    minigrad.set_seed(0)
    dense1, dense2, dense_logits, softmax = _build()
    model_net = nn.SequentialCell([dense1, dense2, dense_logits])
    optimizer = nn.RMSProp(model_net.trainable_params(), learning_rate=0.001, epsilon=1e-7)
    model = Model(model_net, nn.CrossEntropyLoss(), optimizer, metrics={"accuracy": Accuracy()})
    assert isinstance(model.train_network, nn.TrainOneStepWithLossScaleCell)
    assert float(model.train_network.scale_sense.asnumpy()) == 32768.0

    x_train, y_train, x_test, y_test = _digits()
    history = model.train(5, NumpySlicesDataset((x_train, y_train)).batch(32))
    assert history is None
    test_scores = model.eval(NumpySlicesDataset((x_test, y_test), shuffle=False).batch(128))
    assert test_scores["accuracy"] > 0.85
    assert softmax(model_net(Tensor(x_test[:4]))).dtype == minigrad.float32


def test_training_the_model_with_a_custom_training_loop(policy):
    """The guide's custom loop: LossScaleOptimizer(RMSprop), get_scaled_loss,
    get_unscaled_gradients, apply_gradients. Edits: ``value_and_grad`` in place of the tape,
    the loss on the logits, batches of 32."""
    minigrad.set_seed(1)
    dense1, dense2, dense_logits, softmax = _build()
    model = nn.SequentialCell([dense1, dense2, dense_logits, softmax])
    optimizer = nn.RMSProp(model.trainable_params(), learning_rate=0.001, epsilon=1e-7)
    optimizer = mixed_precision.LossScaleOptimizer(optimizer)
    loss_object = nn.CrossEntropyLoss(reduction="mean")
    x_train, y_train, x_test, y_test = _digits()
    train_dataset = NumpySlicesDataset((x_train, y_train)).batch(32)
    test_dataset = NumpySlicesDataset((x_test, y_test), shuffle=False).batch(128)

    def scaled_loss(x, y):
        logits = model[:3](x)   # the loss takes the logits (Keras's takes the probabilities)
        loss = loss_object(logits, y)
        return optimizer.get_scaled_loss(loss), loss

    def train_step(x, y):
        (_, loss), scaled_gradients = value_and_grad(scaled_loss, None,
                                                     model.trainable_params(), has_aux=True)(x, y)
        gradients = optimizer.get_unscaled_gradients(scaled_gradients)
        optimizer.apply_gradients(zip(gradients, model.trainable_params()))
        return loss

    def test_step(x):
        return model(x)

    accuracies = []
    for epoch in range(5):
        losses, correct = [], 0
        for x, y in train_dataset:
            losses.append(float(train_step(x, y).asnumpy()))
        for x, y in test_dataset:
            predictions = test_step(x)
            assert predictions.dtype == minigrad.float32
            correct += int((predictions.asnumpy().argmax(1) == y.asnumpy()).sum())
        accuracies.append(correct / len(y_test))
        print('Epoch {}: loss={}, test accuracy={}'.format(epoch, np.mean(losses),
                                                           accuracies[-1]))
    assert accuracies[-1] > 0.85 and accuracies[-1] >= accuracies[0]
    assert float(optimizer.loss_scale) <= 32768.0


def test_loss_scale_optimizer_docstring_minimize_and_tape():
    """The docstring's ``minimize`` and GradientTape examples. Edits: the SGD takes its variable
    at construction (``nn.SGD([var], 0.25)``), ``tf.Variable(1.)`` is a Parameter, and
    ``value_and_grad`` stands in for the tape."""
    var = Parameter(Tensor(np.float32(1.0)), name="var")
    opt = nn.SGD([var], 0.25)
    opt = mixed_precision.LossScaleOptimizer(opt)

    def loss_fn():
        return var ** 2

    # 'minimize' applies loss scaling and updates the loss sale.
    opt.minimize(loss_fn, var_list=var)
    assert var.numpy() == 0.5

    # If a GradientTape is used to compute gradients instead of `minimize`, you must scale
    # the loss and gradients manually.
    scaled_loss, (scaled_grad,) = value_and_grad(lambda: opt.get_scaled_loss(loss_fn()), None,
                                                 [var])()
    (grad,) = opt.get_unscaled_gradients([scaled_grad])
    opt.apply_gradients([(grad, var)])  # Loss scale is updated here
    assert var.numpy() == 0.25


def test_loss_scale_optimizer_docstring_hyperparameters():
    """Hyperparameters are delegated to the inner optimizer; epsilon, which Keras's Adam does not
    keep as a hyperparameter, is not. Edits: minigrad's Adam takes its parameters and spells
    beta_1 / epsilon ``beta1`` / ``eps`` (the wrapper answers to both ``beta_1`` and ``beta1``)."""
    opt = nn.Adam([Parameter(Tensor(np.ones(2, np.float32)), name="w")], beta1=0.8, eps=1e-5)
    opt = mixed_precision.LossScaleOptimizer(opt)
    assert opt.beta_1 == pytest.approx(0.8)  # Equivalent to `opt.inner_optimizer.beta_1`
    opt.beta_1 = 0.7  # Equivalent to `opt.inner_optimizer.beta_1 = 0.7`
    assert opt.beta_1 == pytest.approx(0.7) and opt.inner_optimizer.beta1 == pytest.approx(0.7)
    assert opt.inner_optimizer.eps == 1e-5
    with pytest.raises(AttributeError, match="'LossScaleOptimizer' object has no attribute "
                                             "'epsilon'"):
        opt.epsilon
    opt.epsilon = 1e-4  # This does NOT set epsilon on `opt.inner_optimizer`
    assert opt.inner_optimizer.eps == 1e-5
    with pytest.raises(ValueError, match="beta_1"):
        opt.beta_1 = 1.5
    opt.learning_rate = 0.01
    assert float(opt.inner_optimizer.learning_rate.asnumpy()) == pytest.approx(0.01)
