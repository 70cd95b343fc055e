"""MkDocs hook: each ``lessons/NN_*.py`` script becomes the page ``lessons/NN_*.md``.

A lesson is written once, as a ``# %%`` cell script (the format jupytext and VS Code read): a
``# %% [markdown]`` cell's comment lines become the page's prose, a ``# %%`` cell becomes a
Python code block, and each figure the cell saves with ``common.save(fig, args.out, "NAME.png")``
is shown below it from ``docs/lessons/figures/NAME.png`` (made by running the lesson in full with
``--out docs/lessons/figures``), or from ``docs/NAME.png`` where the README shows it too. A
figure that is not committed fails the strict build. The page ``lessons/index.md`` ends with the
list of the lessons, each by its title (its first heading).
"""
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"
FIGURES = "docs/lessons/figures"
SAVED = re.compile(r"""common\.save\(\s*\w+\s*,\s*args\.out\s*,\s*["']([\w.-]+\.png)["']""")


def lesson_markdown(source):
    """The Markdown page of one lesson script's text ``source``."""
    parts = []
    for cell in re.split(r"^# %%", source, flags=re.MULTILINE)[1:]:
        header, _, body = cell.partition("\n")
        if header.strip() == "[markdown]":
            lines = [line[2:] if line.startswith("# ") else line.lstrip("#")
                     for line in body.strip("\n").splitlines()]
            parts.append(_fence_commands("\n".join(lines)))
            continue
        code = body.strip("\n")
        if code:
            parts.append(f"```python\n{code}\n```")
        for name in SAVED.findall(code):
            shared = (ROOT / "docs" / name).is_file() and not (ROOT / FIGURES / name).is_file()
            parts.append(f"![{name}]({'../' if shared else 'figures/'}{name})")
    return "\n\n".join(parts) + "\n"


def _fence_commands(prose):
    """Indented paragraphs of ``prose`` (the lesson's command line) as fenced bash blocks: an
    indented block right after a list item would otherwise continue the item's text."""
    paragraphs = prose.split("\n\n")
    for i, paragraph in enumerate(paragraphs):
        lines = paragraph.splitlines()
        if lines and all(line.startswith("    ") for line in lines):
            paragraphs[i] = "```bash\n" + "\n".join(line[4:] for line in lines) + "\n```"
    return "\n\n".join(paragraphs)


def on_files(files, config):
    """Add one generated page per lesson script."""
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.py")):
        text = lesson_markdown(path.read_text(encoding="utf-8"))
        files.append(File.generated(config, f"lessons/{path.stem}.md", content=text))
    return files


def on_page_markdown(markdown, page, config, files):
    """End the lessons' index page with the list of lessons, each by its title."""
    if page.file.src_uri != "lessons/index.md":
        return markdown
    items = []
    for number, path in enumerate(sorted(LESSONS.glob("[0-9][0-9]_*.py")), 1):
        title = re.search(r"^# # (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
        items.append(f"{number}. [{title.group(1)}]({path.stem}.md) (`lessons/{path.name}`)")
    return markdown.rstrip("\n") + "\n\n" + "\n".join(items) + "\n"
