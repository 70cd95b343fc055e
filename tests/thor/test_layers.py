"""DenseThor, Conv2dThor, EmbeddingThor and ConvertNetUtils: same outputs as the plain layers,
factors recorded only when asked (in float32), settings carried or refused."""
import numpy
import pytest

import minigrad
from minigrad import Tensor, nn
from minigrad.ops.conv import im2col


def recorded(layer, x, mode="factors"):
    layer.thor_record = mode
    out = layer(Tensor(x) if not isinstance(x, Tensor) else x)
    out.sum().backward()
    return layer.thor_pending, out


def test_convert_keeps_parameters_names_outputs_and_settings():
    minigrad.set_seed(0)
    net = nn.SequentialCell([
        nn.Conv2d(2, 4, (3, 2), stride=(2, 1), pad_mode="pad", padding=(1, 1, 0, 1),
                  dilation=(1, 2), has_bias=True),
        nn.Flatten(), nn.Dense(4 * 3 * 5, 5, activation="relu"), nn.LayerNorm((5,))])
    x = Tensor(numpy.random.default_rng(0).standard_normal((2, 2, 6, 6)).astype(numpy.float32))
    before = net(x).asnumpy()
    params = list(net.trainable_params())
    names = [p.name for p in params]
    assert nn.ConvertNetUtils().convert_to_thor_net(net) is net
    conv, _, dense, norm = net.cells()
    assert type(conv) is nn.Conv2dThor and type(dense) is nn.DenseThor
    assert conv.kernel_size == (3, 2) and conv.stride == (2, 1) and conv.dilation == (1, 2)
    assert conv.padding == (1, 1, 0, 1) and conv.pad_mode == "pad"
    assert list(net.trainable_params()) == params and [p.name for p in params] == names
    assert norm.thor_diagonal
    numpy.testing.assert_array_equal(net(x).asnumpy(), before)
    conv.thor_record = dense.thor_record = "factors"
    numpy.testing.assert_array_equal(net(x).asnumpy(), before)   # recording changes nothing


def test_grouped_conv_is_refused_and_nothing_converted():
    net = nn.SequentialCell([nn.Dense(4, 4), nn.Conv2d(4, 4, 3, group=2)])
    with pytest.raises(ValueError, match="1 is a Conv2d with group=2"):
        nn.ConvertNetUtils().convert_to_thor_net(net)
    assert type(net.cells()[0]) is nn.Dense
    with pytest.raises(ValueError, match="group"):
        nn.Conv2dThor(4, 4, 3, group=2)


def test_frozen_weights_and_subclasses_are_left_alone():
    class MyDense(nn.Dense):
        pass
    frozen = nn.Dense(3, 3)
    frozen.weight.requires_grad = False
    net = nn.SequentialCell([frozen, MyDense(3, 3), nn.Embedding(5, 3)])
    nn.ConvertNetUtils().convert_to_thor_net(net)
    assert [type(c).__name__ for c in net.cells()] == ["Dense", "MyDense", "EmbeddingThor"]
    with pytest.raises(TypeError, match="must be a Cell"):
        nn.ConvertNetUtils().convert_to_thor_net("net")


def test_dense_records_only_when_asked_and_in_float32():
    layer = nn.DenseThor(3, 2).to_float(minigrad.float16)  # fp16 compute, fp32 weights
    x = numpy.arange(12, dtype=numpy.float16).reshape(4, 3) / 10
    layer(Tensor(x))
    assert layer.thor_pending is None                     # not asked: nothing, no cost
    pending, _ = recorded(layer, x)
    x32 = x.astype(numpy.float32)
    assert pending["a_rows"].dtype == numpy.float32 and pending["rows"] == 4
    assert pending["batch"] == 4 and pending["g_rows"].dtype == numpy.float32
    numpy.testing.assert_array_equal(pending["a_rows"], x32)
    numpy.testing.assert_array_equal(pending["g_rows"], numpy.ones((4, 2)))  # d = 1
    assert pending["a_trace"] == pytest.approx(float((x32 ** 2).sum()))
    assert pending["g_trace"] == pytest.approx(8.0)
    with minigrad.no_grad():
        layer.thor_record = "factors"
        layer.thor_pending = None
        layer(Tensor(x))
    assert layer.thor_pending is None                     # evaluation records nothing


def test_conv_records_the_im2col_patches_per_sample_and_position():
    rng = numpy.random.default_rng(1)
    layer = nn.Conv2dThor(2, 3, (2, 3), stride=2, pad_mode="same")
    x = rng.standard_normal((2, 2, 5, 5)).astype(numpy.float32)
    pending, out = recorded(layer, x)
    from minigrad.ops.conv import same_padding
    patches = im2col(x, (2, 3), 2, same_padding((5, 5), (2, 3), 2)).reshape(-1, 12)
    assert pending["rows"] == patches.shape[0] == 2 * out.shape[2] * out.shape[3]
    numpy.testing.assert_allclose(pending["a_rows"], patches, rtol=1e-6)
    numpy.testing.assert_array_equal(pending["g_rows"], numpy.ones((patches.shape[0], 3)))
    assert pending["g_trace"] == pytest.approx(3.0 * patches.shape[0])


def test_embedding_records_token_counts():
    layer = nn.EmbeddingThor(6, 2)
    ids = Tensor(numpy.array([[0, 2, 2], [5, 2, 0]], numpy.int32))
    pending, _ = recorded(layer, ids)
    numpy.testing.assert_array_equal(pending["a_rows"], [2, 0, 3, 0, 0, 1])
    assert pending["rows"] == 6 and pending["batch"] == 2 and pending["a_trace"] == 6.0
    numpy.testing.assert_array_equal(pending["g_rows"], numpy.ones((6, 2)))
