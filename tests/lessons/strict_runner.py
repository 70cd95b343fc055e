"""Run one lesson (``--quick``) on the strict device with the context's device set to "GPU":
``python strict_runner.py LESSON.py OUT_DIR``. Every array the lesson makes through minigrad
lives on the stand-in GPU, which refuses implicit host conversions; the last line printed is
``host reads: N``."""
import runpy
import sys

import matplotlib

import minigrad
from minigrad.testing.strict_device import strict_device

matplotlib.use("Agg")


def main(script, out):
    sys.argv = [script, "--quick", "--out", out]
    sys.path.insert(0, str(__import__("pathlib").Path(script).parent))
    with strict_device() as reads:
        minigrad.set_context(device_target="GPU")
        runpy.run_path(script, run_name="__main__")
    print(f"host reads: {reads.count}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
