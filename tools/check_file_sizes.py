#!/usr/bin/env python3
"""Checks that no source file in src/ or apps/ is longer than LIMIT lines: past that a file does
several jobs (the house rule). The files longer today are listed in tools/oversized_files.txt
with their length, until they are split: each may shrink, not grow, and leaves the list once it
is within the limit. One line per violation; exit 1 if any. Usage: check_file_sizes.py [SOURCE-DIR]"""
import sys
from pathlib import Path

LIMIT = 600
LIST = "tools/oversized_files.txt"


def line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    listed = {}
    for line in (root / LIST).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        lines, path = line.split(maxsplit=1)
        listed[path] = int(lines)
    errors = []
    sources = sorted(p for d in ("src", "apps") for p in (root / d).rglob("*") if p.suffix in (".cc", ".h"))
    for path in sources:
        name = path.relative_to(root).as_posix()
        n = line_count(path)
        if name in listed:
            if n > listed[name]:
                errors.append(f"{name}: {n} lines, more than the {listed[name]} {LIST} allows it until it is split")
            elif n <= LIMIT:
                errors.append(f"{name}: {n} lines, within {LIMIT} now: remove it from {LIST}")
        elif n > LIMIT:
            errors.append(f"{name}: {n} lines, more than {LIMIT}: split it where it does several jobs")
    names = {p.relative_to(root).as_posix() for p in sources}
    errors += [f"{LIST}: {name} does not exist" for name in listed if name not in names]
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
