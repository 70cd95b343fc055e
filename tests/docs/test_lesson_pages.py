"""The documentation's lesson pages, made from the lesson scripts by docs/hooks/lessons.py: every
markdown cell's text and every code cell reach the page, and every figure a lesson saves is
committed where its page shows it (a small PNG)."""
import importlib.util
import re

import pytest

from helpers import REPO_ROOT

LESSONS = sorted((REPO_ROOT / "lessons").glob("[0-9][0-9]_*.py"))


def _hook():
    spec = importlib.util.spec_from_file_location("lessons_hook",
                                                  REPO_ROOT / "docs" / "hooks" / "lessons.py")
    pytest.importorskip("mkdocs")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda path: path.stem)
def test_lesson_page_holds_the_script_and_its_figures(lesson):
    source = lesson.read_text(encoding="utf-8")
    page = _hook().lesson_markdown(source)
    assert page.startswith("# Lesson ")
    assert "# %%" not in page
    for line in ("args = common.parse_args(__doc__)", "import common"):
        assert line in source and line in page, line
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page)
    assert figures and len(figures) == len(re.findall(r"common\.save\(", source))
    for figure in figures:
        path = (REPO_ROOT / "docs" / "lessons" / figure).resolve()
        assert path.is_file(), f"{lesson.name}: {figure} is not committed under docs/"
        assert path.stat().st_size < 300_000, f"{figure} is not a small PNG"


def test_an_indented_command_becomes_a_code_block():
    page = _hook().lesson_markdown("# %% [markdown]\n# 1. an item\n#\n#     python x.py --quick\n")
    assert page == "1. an item\n\n```bash\npython x.py --quick\n```\n"
