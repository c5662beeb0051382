"""Assemble docs/DESIGN.md from the fragments in docs/design/ (one per area), or check that it is current.

    python scripts/design_doc.py           # write docs/DESIGN.md
    python scripts/design_doc.py --check   # exit 1 if docs/DESIGN.md is not what the fragments make

The overview (00-overview.md) opens the file with its title; every other fragment whose first heading is
a title (#) has its headings moved one level down, so that each area is one section of the whole.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAGMENTS = ROOT / "docs" / "design"
DESIGN = ROOT / "docs" / "DESIGN.md"
ORDER = [
    "00-overview.md",
    "engine.md",
    "heads.md",
    "traces.md",
    "app.md",
    "security.md",
    "bench-and-loading.md",
    "testing.md",
    "gpu-check.md",
    "traffic.md",
    "batching.md",
]
GENERATED = "<!-- Made by scripts/design_doc.py from docs/design/*.md: edit those, then run the script. -->"


def demoted(text: str) -> str:
    """Every heading one level down, code blocks left alone."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        lines.append("#" + line if not fenced and line.startswith("#") else line)
    return "\n".join(lines)


def fragments() -> list[Path]:
    found = {p.name: p for p in FRAGMENTS.glob("*.md")}
    unknown = sorted(set(found) - set(ORDER))
    if unknown:
        raise SystemExit(f"docs/design has fragments not in design_doc.ORDER: {', '.join(unknown)}")
    return [found[name] for name in ORDER if name in found]


def assemble() -> str:
    parts = []
    for path in fragments():
        text = path.read_text(encoding="utf-8").strip()
        parts.append(text if path.name == ORDER[0] or not text.startswith("# ") else demoted(text))
    return f"{GENERATED}\n\n" + "\n\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    text = assemble()
    if "--check" in argv:
        current = DESIGN.read_text(encoding="utf-8") if DESIGN.exists() else ""
        if current != text:
            print("docs/DESIGN.md is out of date: run python scripts/design_doc.py", file=sys.stderr)
            return 1
        return 0
    DESIGN.write_text(text, encoding="utf-8")
    print(f"wrote {DESIGN.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
