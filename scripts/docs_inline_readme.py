"""Move the README sections the docs include into the pages themselves (for the day README.md
becomes a short front page).

    .venv/bin/python scripts/docs_inline_readme.py [--docs DIR] [--readme FILE]

Every ```{include} …README.md``` block in the docs' pages is replaced by the text it includes, with
its links rewritten as the build rewrites them (docs/_ext/readme_include.py). Prints each README
section moved, by the text it starts after, so they can then be cut from the README. Run it
once, then `bash scripts/docs.sh`; the README is not changed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

from readme_include import site_text  # noqa: E402

BLOCK = re.compile(r"```\{include\} (?:\.\./)+README\.md\n((?::[\w-]+:.*\n)*)```\n")


def _option(value: str) -> str:
    value = value.strip()
    return json.loads(value) if value.startswith('"') else value


def included(readme: str, options: dict[str, str]) -> str:
    """The README text a MyST include with these options takes (start-after, end-before)."""
    text = readme
    if "start-after" in options:
        start = text.index(options["start-after"])  # ValueError: the build would fail the same way
        text = text[start + len(options["start-after"]) :]
    if "end-before" in options:
        text = text[: text.index(options["end-before"])]
    return text


def inline(page: str, readme: str) -> tuple[str, list[str]]:
    """The page with its README includes replaced by their text, and the sections moved."""
    moved: list[str] = []

    def replace(match: re.Match[str]) -> str:
        options = {}
        for line in match.group(1).splitlines():
            key, _, value = line[1:].partition(":")
            options[key] = _option(value)
        moved.append(options.get("start-after", "(start of README.md)"))
        return site_text(included(readme, options)).strip("\n") + "\n"

    return BLOCK.sub(replace, page), moved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default=str(ROOT / "docs"))
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args(argv)
    readme = Path(args.readme).read_text()
    for path in sorted(Path(args.docs).rglob("*.md")):
        if "_build" in path.parts:
            continue
        text, moved = inline(path.read_text(), readme)
        if moved:
            path.write_text(text)
            for section in moved:
                print(f"{path.relative_to(args.docs)}: now holds README section {section!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
