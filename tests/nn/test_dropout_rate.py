"""``nn.Dropout``: ``p`` is the drop rate (MindSpore 2.x); ``keep_prob`` is deprecated."""
import warnings

import numpy
import pytest

import minigrad
from minigrad import Tensor, nn


def _dropped_fraction(layer):
    minigrad.set_seed(0)
    out = layer.set_train()(Tensor(numpy.ones((200, 200), numpy.float32))).asnumpy()
    return float((out == 0).mean())


def test_p_is_the_drop_rate_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer = nn.Dropout(p=0.2)
        default = nn.Dropout()
    assert layer.p == 0.2 and layer.keep_prob == pytest.approx(0.8)
    assert _dropped_fraction(layer) == pytest.approx(0.2, abs=0.01)
    assert default.p == 0.5
    assert "p=0.2" in repr(layer)


def test_keep_prob_by_keyword_warns_as_mindspore_2_does():
    with pytest.warns(FutureWarning, match="`keep_prob` will be deprecated, please use `p`"):
        layer = nn.Dropout(keep_prob=0.9)
    assert layer.p == pytest.approx(0.1)
    assert _dropped_fraction(layer) == pytest.approx(0.1, abs=0.01)


def test_a_positional_value_below_one_half_warns_that_it_is_a_keep_probability():
    with pytest.warns(FutureWarning, match=r"Dropout\(0.2\) keeps 20% of the elements and drops "
                                           r"80%; to drop 20%, write Dropout\(p=0.2\)"):
        layer = nn.Dropout(0.2)
    assert layer.keep_prob == pytest.approx(0.2)
    with pytest.warns(FutureWarning) as record:
        nn.Dropout(0.8)
    assert "keeps" not in str(record[0].message)


def test_bad_dropout_arguments_are_named():
    with pytest.raises(TypeError, match="not both"):
        nn.Dropout(keep_prob=0.5, p=0.5)
    with pytest.raises(TypeError, match="both positionally and by keyword"):
        nn.Dropout(0.5, keep_prob=0.5)
    with pytest.raises(TypeError, match="at most 2 positional"):
        nn.Dropout(0.5, None, 3)
    with pytest.raises(ValueError, match=r"p must be .*\[0(\.0)?, 1(\.0)?\)"):
        nn.Dropout(p=1.0)
    with pytest.raises((TypeError, ValueError), match="p must be"):
        nn.Dropout(p="0.1")
