"""``backend.read_scalars``: n device values in one read, exact for float32, float16, bool and
int32, host values passed through, and the queued device checks raised with the transfer."""
import numpy
import pytest

from minigrad import backend
from minigrad.testing.strict_device import strict_device


def test_several_values_in_one_read():
    with strict_device() as reads:
        xp = backend.cupy
        values = [xp.asarray(numpy.float32(1.1)), xp.asarray(numpy.float16(65504.0)),
                  xp.asarray(True), xp.asarray(numpy.int32(-7)), 2.5, numpy.float32(0.25)]
        out = backend.read_scalars(values)
        assert reads.count == 1
    assert out == [float(numpy.float32(1.1)), 65504.0, 1.0, -7.0, 2.5, 0.25]
    assert all(type(v) is float for v in out)


def test_host_values_read_nothing():
    with strict_device() as reads:
        assert backend.read_scalars([numpy.float32(3.0), 4]) == [3.0, 4.0]
        assert backend.read_scalars([]) == []
        assert reads.count == 0


def test_the_queued_checks_come_back_with_the_read():
    with strict_device() as reads:
        xp = backend.cupy
        backend.defer_check("label", xp.asarray(numpy.array([1.0, 12.0])),
                            lambda host: ValueError(f"label {host[1]:g} out of range"))
        with pytest.raises(ValueError, match="label 12 out of range"):
            backend.read_scalars([xp.asarray(numpy.float32(1.0))])
        assert reads.count == 1
        assert backend.read_scalars([xp.asarray(numpy.float32(1.0))]) == [1.0]  # queue cleared
