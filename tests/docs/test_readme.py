"""The Python examples of the README and of every page in docs/ run as written (so the pages a
user reads cannot rot), and print what they say they print."""
import re

import pytest

from helpers import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = [README] + sorted((REPO_ROOT / "docs").rglob("*.md"))
BLOCKS = [(page.relative_to(REPO_ROOT).as_posix(), block) for page in PAGES
          for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)]


def test_readme_and_pages_have_examples():
    assert len(BLOCKS) >= 8
    assert {"README.md", "docs/autograd.md", "docs/loss-scaling.md", "docs/thor.md"} <= {
        page for page, _ in BLOCKS}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index, capsys):
    page, block = BLOCKS[index]
    if re.search(r"\b(bfloat16|float8_e4m3fn|float8_e5m2)\b", block):
        pytest.importorskip("ml_dtypes", reason="the lowp extra (bfloat16, FP8) is not installed")
    exec(compile(block, f"{page} python block {index}", "exec"), {})


def _block(marker):
    (block,) = [(page, b) for page, b in BLOCKS if marker in b]
    return block


def _printed(marker, capsys):
    capsys.readouterr()
    page, block = _block(marker)
    exec(compile(block, page, "exec"), {})
    return capsys.readouterr().out.splitlines()


def test_examples_print_what_their_comments_say(capsys):
    """The outputs written in the examples' comments are the outputs a user sees."""
    assert _printed("w.grad.shape, w.grad.dtype", capsys)[0] == "(3, 2) float32"
    assert _printed("NPUGetFloatStatus", capsys) == ["False", "True"]
    report = _printed("train.last_report", capsys)
    assert len(report) == 1 and "applied" in report[0] and "4096" in report[0]
    report = _printed("scaler.last_report", capsys)
    assert report == ["step 1: applied, loss scale 4096 -> 4096"]
    unscaled, scaled = (eval(line) for line in _printed("gradient_exponents", capsys))
    assert set(unscaled) == set(scaled) == {"flushed", "subnormal", "normal", "overflow"}
    assert unscaled["normal"] == 0 and scaled["normal"] > 0.9   # 1e-7 is below fp16's normals
    assert _printed("(hv,) = grad(", capsys) == ["[ 6. 12.  0.]", "True (3, 3)"]
    assert _printed("strict_device() as reads", capsys) == ["GPU 1 get_status"]
    assert _printed("class Softplus", capsys) == [
        "[0.2689 0.5    0.8808]", "[0.1966 0.25   0.105 ]", "float32"]


def test_readme_layout_names_existing_files_and_every_public_module():
    """Each file the Layout section names exists; on the lines that list a package's files, every
    public module of that package is named (ops/ and nn/layers/ are summarised on purpose)."""
    text = README.read_text(encoding="utf-8")
    layout = text.split("## Layout", 1)[1].split("```", 2)[1]
    root = README.parent
    listed, folder = {}, None
    for line in layout.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if line.startswith("    ") and folder:  # a continuation of the previous folder's files
            tokens = [folder + "/"] + tokens
        elif tokens[0] == "minigrad/":
            folder = "minigrad"
        elif tokens[0].endswith("/"):
            folder = tokens[0].rstrip("/")
            if line.startswith("  ") and (root / "minigrad" / folder).is_dir():
                folder = f"minigrad/{folder}"
        else:
            folder, tokens = "minigrad", ["minigrad/"] + tokens
        names = [t for t in tokens[1:] if t.endswith((".py", ".cu", ".h", ".cpp"))]
        for name in names:
            assert (root / folder / name).is_file(), (
                f"README Layout names {folder}/{name}, which does not exist"
            )
        if names and folder.startswith("minigrad"):
            listed.setdefault(folder, set()).update(names)
    for folder, names in listed.items():
        if folder == "minigrad/ops":  # "one op family per file": summarised
            continue
        public = {p.name for p in (root / folder).glob("*.py") if not p.name.startswith("_")}
        assert public <= names, f"README Layout for {folder}/ leaves out {sorted(public - names)}"
