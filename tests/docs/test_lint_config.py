"""The line width is written twice, for ruff (ruff.toml) and for pycodestyle-based tools
(setup.cfg's [pycodestyle]); the two must say the same number."""
import configparser
import re

from helpers import REPO_ROOT


def test_ruff_and_setup_cfg_give_the_same_line_width():
    ruff = re.search(r"^line-length\s*=\s*(\d+)\s*$", (REPO_ROOT / "ruff.toml").read_text(), re.M)
    assert ruff is not None, "ruff.toml sets no line-length"
    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg")
    assert int(ruff.group(1)) == setup.getint("pycodestyle", "max-line-length") == 100
