#!/usr/bin/env python3
"""Checks that every layer includes only itself and the layers it builds on (CMake runs it at
every build; a violation fails the build with one line per include). Layers are folders:
src/<layer>/ with include/atp/<layer>/ (the core: src/core/ with the headers directly in
include/atp/). Usage: check_layers.py [SOURCE-DIR]"""
import re
import sys
from pathlib import Path

# What each layer may include besides itself: the layers below it that it is built on. Adding a
# layer or an edge is one line here, next to its add_subdirectory in CMakeLists.txt.
USES = {
    "core": [],
    "plan": ["core"],
    # rina -> control: its protocol entry's config codec (protocol.cc) reads fields as control's do.
    "rina": ["control", "plan", "core"],
    "plink": ["schedule", "plan"],
    "schedule": [],
    "io": ["core"],
    "sim": ["io", "core"],
    "control": ["plan", "io", "core"],
    "daemons": ["control", "plan", "io", "core"],
    "collectives": ["io", "core"],
    "baselines": ["collectives", "schedule", "io", "core"],
    "cluster": ["control", "collectives", "plan", "rina", "io", "core"],
    "scenario": ["plink", "schedule", "sim", "plan", "io", "core"],
    "backends": ["scenario", "cluster", "baselines", "collectives", "plink", "schedule", "control", "sim", "plan", "io",
                 "core"],
    "torch": ["scenario", "cluster", "baselines", "collectives", "plink", "schedule", "plan", "io", "core"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path: Path, root: Path):
    """The layer a file of the tree belongs to, or None outside the layered folders."""
    parts = path.relative_to(root).parts
    if parts[:2] == ("include", "atp"):
        return parts[2] if len(parts) > 3 else "core"
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    return None


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = []
    files = sorted(p for d in ("src", "include") for p in (root / d).rglob("*") if p.suffix in (".h", ".cc"))
    for path in files:
        layer = layer_of(path, root)
        if layer is None:
            continue
        if layer not in USES:
            problems.append(f"{path.relative_to(root)}: folder '{layer}' is no layer of tools/check_layers.py")
            continue
        for included in INCLUDE.findall(path.read_text()):
            target = root / "include" / included if included.startswith("atp/") else (path.parent / included).resolve()
            if not target.exists():
                continue  # the compiler reports it
            used = layer_of(target, root)
            if used is not None and used != layer and used not in USES[layer]:
                problems.append(f"{path.relative_to(root)}: the {layer} layer includes \"{included}\" of the "
                                f"{used} layer, which it does not build on")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
