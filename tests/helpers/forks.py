"""Waiting on a forked child in a test: the child must exit within a deadline, not hang (GNU
OpenMP's team and OpenBLAS's threads do not survive a fork)."""
import os
import signal
import time

import pytest


def exit_code(pid, what, timeout=60):
    """The exit code of the forked child ``pid``; the test fails, naming ``what``, and the child
    is killed, if it has not exited within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung {what}")
        time.sleep(0.02)
