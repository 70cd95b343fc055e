"""The documentation site builds with ``mkdocs build --strict`` (as ``.ci/run`` builds it): a page
left out of the nav, a broken link or anchor, a missing figure, or a docstring that griffe cannot
parse fails it. Skipped, with the reason, where the ``docs`` extra is not installed."""
import os
import subprocess
import sys

import pytest

from helpers import REPO_ROOT


def test_mkdocs_build_strict_passes(tmp_path):
    for package in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(package, reason="the docs extra is not installed")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    problems = [line for line in result.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0, "\n".join(problems) or result.stderr[-3000:]
