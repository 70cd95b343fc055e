"""The iterator that ``create_tuple_iterator`` and ``create_dict_iterator`` return, and the
pinned host buffers that carry its batches to a GPU."""
import numpy

from minigrad import backend
from minigrad import dtype as dtypes
from minigrad._checks import check_bool, check_int, check_positive_int, check_str_tuple
from minigrad._config import config
from minigrad.tensor import Tensor, make

# Pinned buffers per column, used in turn: a buffer is written again only once the copy from
# it two batches ago has finished (its event), which the training step in between has waited for.
STAGING_DEPTH = 2


class PinnedStaging:
    """Copies host arrays to the GPU through pinned (page-locked) host buffers.

    ``upload(column, array)`` writes ``array`` into the next of ``STAGING_DEPTH`` pinned buffers
    of ``column`` and starts an asynchronous copy from there to a new device array, which it
    returns. From pinned memory the copy runs without another staging copy and without blocking
    the host; an event recorded after it says when the buffer may be written again.
    """

    def __init__(self):
        self._slots = {}  # column -> [(pinned array, event or None)] * STAGING_DEPTH
        self._turn = {}   # column -> index of the next slot

    def upload(self, column, array):
        cupy = backend.cupy
        array = numpy.ascontiguousarray(array)
        slots = self._slots.setdefault(column, [(None, None)] * STAGING_DEPTH)
        turn = self._turn.get(column, 0)
        self._turn[column] = (turn + 1) % STAGING_DEPTH
        pinned, event = slots[turn]
        if event is not None:
            event.synchronize()  # the copy from this buffer two batches ago has finished
        if pinned is None or pinned.nbytes < array.nbytes:
            memory = cupy.cuda.alloc_pinned_memory(array.nbytes)
            pinned = numpy.frombuffer(memory, numpy.uint8, array.nbytes)
        staged = pinned[:array.nbytes].view(array.dtype).reshape(array.shape)
        staged[...] = array
        device_array = cupy.asarray(staged)  # asynchronous from pinned memory
        event = cupy.cuda.Event()
        event.record()
        slots[turn] = (pinned, event)
        return device_array


class RowIterator:
    """The object returned by ``create_tuple_iterator`` / ``create_dict_iterator``."""

    def __init__(self, dataset, columns, num_epochs, output_numpy, as_dict, device=None):
        self.device = backend.check_device(config.device_target if device is None else device)
        self._staging = PinnedStaging() if self.device == "GPU" and not output_numpy else None
        if check_int("num_epochs", num_epochs) != -1:
            check_positive_int("num_epochs", num_epochs)  # or -1: no limit
        self.output_numpy = check_bool("output_numpy", output_numpy)
        names = dataset.get_col_names()
        if columns is not None:
            columns = list(check_str_tuple("columns", columns, owner="create_tuple_iterator"))
            unknown = [c for c in columns if c not in names]
            if unknown:
                raise ValueError(f"columns {unknown} are not columns of the dataset {names}")
        self.dataset = dataset
        self.names = columns or names
        self.positions = [names.index(c) for c in columns] if columns else None
        self.num_epochs = num_epochs
        self.as_dict = as_dict
        self.epoch = 0
        self._rows = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._rows is None:
            if self.num_epochs != -1 and self.epoch >= self.num_epochs:
                raise StopIteration
            self._rows = iter(self.dataset._rows())
        try:
            row = next(self._rows)
        except StopIteration:
            self._rows = None
            self.epoch += 1
            raise
        if self.positions is not None:
            row = tuple(row[p] for p in self.positions)
        if self._staging is not None:
            row = tuple(make(self._staging.upload(i, value), None, 0) if _host_array(value)
                        else Tensor(value, device="GPU") for i, value in enumerate(row))
        elif not self.output_numpy:
            row = tuple(Tensor(value, device=self.device) for value in row)
        return dict(zip(self.names, row)) if self.as_dict else row

    def get_next(self):
        return next(self)


def _host_array(value):
    """Whether ``value`` is a NumPy array of a dtype a Tensor keeps (staged as it is)."""
    return isinstance(value, numpy.ndarray) and value.dtype in dtypes.SUPPORTED
