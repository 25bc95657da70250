#!/usr/bin/env python3
"""Checks that no source file in src/ or apps/ is longer than LIMIT lines: past that a file does
several jobs (the house rule). One line per violation; exit 1 if any.
Usage: check_file_sizes.py [SOURCE-DIR]"""
import sys
from pathlib import Path

LIMIT = 600


def line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    errors = []
    for path in sorted(p for d in ("src", "apps") for p in (root / d).rglob("*") if p.suffix in (".cc", ".h")):
        n = line_count(path)
        if n > LIMIT:
            errors.append(f"{path.relative_to(root).as_posix()}: {n} lines, more than {LIMIT}: split it where it "
                          "does several jobs")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
