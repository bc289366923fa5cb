"""Every pointer into the docs leads somewhere: a link to a section, and a reference such as
(docs/firmware.md, "Figures") in the docs, the code or the tests, names a heading or a bold
paragraph title of that document."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = {p.name: p for p in sorted((ROOT / "docs").glob("*.md"))} | {"README.md": ROOT / "README.md"}
SOURCES = [p for d in ("firmware", "host/rmc", "tests") for p in sorted((ROOT / d).rglob("*.py"))]

QUOTED = re.compile(r'(?:docs/)?([A-Za-z_]+\.md),? "([^"]+)"')
ANCHOR = re.compile(r"\]\(([A-Za-z_]+\.md)?#([^)]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def titles(text: str) -> list[str]:
    heads = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    return heads + re.findall(r"\*\*([^*]+)\*\*", text)


def broken(name: str, text: str, texts: dict[str, str]) -> list[str]:
    out = []
    flat = " ".join(re.sub(r"\n\s*#", " ", text).split())  # may span lines, comments too
    for m in QUOTED.finditer(flat):
        doc, title = m.groups()
        if doc in texts and not any(title.lower() in t.lower() for t in titles(texts[doc])):
            out.append(f"{name}: {doc}, {title!r}: no such section")
    for m in ANCHOR.finditer(text):
        doc, anchor = m.group(1) or name, m.group(2)
        if doc in texts and anchor not in {slug(t) for t in titles(texts[doc])}:
            out.append(f"{name}: {doc}#{anchor}: no such heading")
    return out


def test_every_pointer_into_the_docs_leads_to_a_section():
    texts = {n: p.read_text(encoding="utf-8") for n, p in DOCS.items()}
    problems = [p for n, t in texts.items() for p in broken(n, t, texts)]
    for src in SOURCES:
        problems += broken(str(src.relative_to(ROOT)), src.read_text(encoding="utf-8"), texts)
    assert not problems, "\n".join(problems)


def test_a_pointer_to_nothing_is_found():
    texts = {"a.md": "# Intro\n\n**The model.** text\n", "b.md": "# B\n"}
    assert broken("b.md", 'see a.md, "The model" and [x](a.md#intro)', texts) == []
    found = broken("b.md", 'see docs/a.md, "Measured" and [x](#nowhere)', texts)
    assert found == [
        "b.md: a.md, 'Measured': no such section",
        "b.md: b.md#nowhere: no such heading",
    ]
