"""Writers killed with SIGKILL at random points leave no temporary file behind the next save.

Each kill forks a writer (a ``save_checkpoint`` loop, or ``Model.train`` with ``ModelCheckpoint``
rotation) and kills it, at a random moment or as soon as one of its saves is under way, then waits
until it is dead; half the dead writers are left unreaped (zombies, as a parent that has not
called ``wait`` yet leaves them) until the end. Then one more save goes into the folder and no
``.tmp`` file may be left.

The default run kills ``_KILLS`` = 30 writers of each kind (about a second each);
``MINIGRAD_CHECKPOINT_KILLS=300`` (or more) runs the long version.
"""
import os
import random
import signal
import time

import numpy
import pytest

from minigrad import nn
from minigrad.dataset import NumpySlicesDataset
from minigrad.nn import Momentum
from minigrad.train import CheckpointConfig, Model, ModelCheckpoint, save_checkpoint
from minigrad.train.checkpoint_file import remove_stale_temp_files, temp_name

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_KILLS = int(os.environ.get("MINIGRAD_CHECKPOINT_KILLS", "30"))


def _save_loop(directory):
    arrays = [{"name": f"w{i}", "data": numpy.full(4096, i, numpy.float32)} for i in range(4)]
    for k in range(10 ** 9):
        save_checkpoint(arrays, os.path.join(directory, f"net{k % 3}"))


def _train_with_rotation(directory):
    net = nn.Dense(4, 2)
    model = Model(net, nn.MSELoss(), Momentum(net.trainable_params(), 0.01, 0.9))
    columns = (numpy.ones((8, 4), numpy.float32), numpy.ones((8, 2), numpy.float32))
    data = NumpySlicesDataset(columns, shuffle=False).batch(2)
    config = CheckpointConfig(save_checkpoint_steps=1, keep_checkpoint_max=2)
    model.train(10 ** 6, data, callbacks=[ModelCheckpoint(directory=directory, config=config)])


def _fork(work, directory):
    """Start ``work(directory)`` in a child; return its pid once it runs."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(read_end)
            os.write(write_end, b"r")
            work(directory)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_end)
    os.read(read_end, 1)
    os.close(read_end)
    return pid


def _temp_files(directory):
    return sorted(name for name in os.listdir(directory) if name.endswith(".tmp"))


def _wait_for_a_write(directory, pid, timeout=5.0):
    """Return as soon as ``pid`` has a temp file in ``directory`` (a save under way)."""
    mark, deadline = f".{pid}.", time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(mark in name for name in _temp_files(directory)):
            return


def _kill_writers(directory, work, kills, seed, max_delay):
    """Fork ``kills`` writers one after another and SIGKILL each: half at a random moment, half
    as soon as a save of theirs is under way. Return (how many kills left a temp file, the
    unreaped dead writers)."""
    rng = random.Random(seed)
    left_temp, zombies = 0, []
    for _ in range(kills):
        pid = _fork(work, directory)
        if rng.random() < 0.5:
            time.sleep(rng.uniform(0.0, max_delay))
        else:
            _wait_for_a_write(directory, pid)
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead, still unreaped
        if rng.random() < 0.5:
            zombies.append(pid)
        else:
            os.waitpid(pid, 0)
        left_temp += any(f".{pid}." in name for name in _temp_files(directory))
    return left_temp, zombies


@pytest.mark.parametrize("work, max_delay", [(_save_loop, 0.02), (_train_with_rotation, 0.05)],
                         ids=["save_checkpoint-loop", "Model.train-ModelCheckpoint"])
def test_the_next_save_removes_every_temp_file_of_killed_writers(tmp_path, work, max_delay):
    directory = str(tmp_path)
    left_temp, zombies = _kill_writers(directory, work, _KILLS, seed=_KILLS, max_delay=max_delay)
    try:
        # some kills landed inside a write, or the test would prove nothing
        assert left_temp >= 1, f"no kill of {_KILLS} landed inside a write"
        save_checkpoint({"w": numpy.ones(2, numpy.float32)}, os.path.join(directory, "last"))
        assert _temp_files(directory) == [], (
            f"{_KILLS} kills ({left_temp} left a temp file), {len(zombies)} writers unreaped")
    finally:
        for pid in zombies:
            os.waitpid(pid, 0)


def test_a_live_writers_temp_file_is_left_alone(tmp_path):
    directory = str(tmp_path)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # a writer that has started its temp file and is still writing
        os.close(read_end)
        path = temp_name(os.path.join(directory, "net.ckpt"))
        with open(path, "wb") as f:
            f.write(b"half an archive")
            f.flush()
            os.write(write_end, path.encode() + b"\n")
            time.sleep(60)
        os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            live = pipe.readline().decode().strip()
        os.kill(pid, signal.SIGSTOP)  # a stopped writer is alive too
        save_checkpoint({"w": numpy.ones(2, numpy.float32)}, os.path.join(directory, "net"))
        assert os.path.exists(live)
        os.kill(pid, signal.SIGCONT)
        save_checkpoint({"w": numpy.ones(2, numpy.float32)}, os.path.join(directory, "net"))
        assert remove_stale_temp_files(directory) == [] and os.path.exists(live)
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert remove_stale_temp_files(directory) == [live]  # dead, even before it is reaped
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
