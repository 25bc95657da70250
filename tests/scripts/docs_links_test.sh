#!/bin/bash
# Every link and file path that README.md and docs/*.md name exists in the repository, and none
# points outside it (the repository is cloned alone). Usage: docs_links_test.sh [SOURCE-DIR]
#
# Checked, per line of each file (one line per problem, "FILE:LINE: 'TARGET' does not exist", exit 1):
#  - Markdown links and images, [x](path) and [x](path#anchor), reference definitions [x]: path, and
#    HTML src="..."/href="...", resolved against the folder of the file that holds them (the
#    anchor itself is not checked); http(s)://, mailto: and other schemes are not fetched;
#  - paths in text, code spans and code blocks that start with a top-level folder of the
#    repository (src/, include/, tests/, examples/, docs/, apps/, experiments/, tools/, python/,
#    bench/, fuzz/, cmake/), resolved against the repository root: `*` and a placeholder such as
#    `<name>` match within one path component, {a,b} is expanded, a trailing / names a folder;
#  - paths that start with ../ (in links or text) must stay inside the repository.
# Not checked: bare file names (`wire.h`, `plot.py`: which folder is meant is the prose's to say,
# and some name generated outputs or ns-3's headers), and build outputs (build/...), which are not
# in the repository. "In the repository" means tracked, or new and not ignored by .gitignore,
# when SOURCE-DIR is a git work tree; otherwise any file under it outside build*/.
set -u
SRC=${1:-$(dirname "$0")/../..}
exec /usr/bin/python3 - "$SRC" <<'PYTHON'
import fnmatch
import glob
import os
import re
import subprocess
import sys
import urllib.parse

root = os.path.realpath(sys.argv[1])

def repository_files():
    """Paths (relative, '/'-separated) of the repository's files that exist on disk."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, check=True).stdout.strip()
        if os.path.realpath(top) == root:
            listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                                     "--exclude-standard"], capture_output=True, text=True,
                                    check=True).stdout.split("\0")
            return {f for f in listed if f and os.path.isfile(os.path.join(root, f))}
    except (OSError, subprocess.CalledProcessError):
        pass
    files = set()
    for folder, dirs, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if d != ".git" and not (rel == "." and d.startswith("build"))]
        files.update(os.path.normpath(os.path.join(rel, n)).replace(os.sep, "/") for n in names)
    return files

files = repository_files()
folders = {"."}
for f in files:
    parts = f.split("/")
    folders.update("/".join(parts[:i]) for i in range(1, len(parts)))

def expand_braces(pattern):
    """src/{a,b}/x.{h,cc} -> the four paths (nested braces are not used in the docs)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [e for alt in m.group(1).split(",")
            for e in expand_braces(pattern[:m.start()] + alt + pattern[m.end():])]

def exists(path):
    """path: relative to the root, normalised; may hold * or <name> (any part of one component)."""
    want_folder = path.endswith("/")
    path = path.rstrip("/") or "."
    path = re.sub(r"<[^<>/]*>", "*", path)
    if not any(c in path for c in "*?["):
        return path in folders or (not want_folder and path in files)
    parts = path.split("/")
    candidates = folders if want_folder else folders | files
    return any(len(c.split("/")) == len(parts) and
               all(fnmatch.fnmatchcase(a, b) for a, b in zip(c.split("/"), parts)) for c in candidates)

def inside(path):
    return path != ".." and not path.startswith("../") and not os.path.isabs(path)

problems = []

def report(doc, line, target, why=""):
    problem = f"{doc}:{line}: '{target}' does not exist{why}"
    if problem not in problems:
        problems.append(problem)

def check_relative(doc, line, target, base):
    """A link target or ../ path: relative to base (a folder, relative to the root)."""
    if target.startswith("/"):
        report(doc, line, target, " (an absolute path: link relative to the file instead)")
        return
    for t in expand_braces(target):
        resolved = os.path.normpath(os.path.join(base, t))
        if not inside(resolved):
            report(doc, line, target, " in the repository: it points outside it, and the repository is cloned alone")
            return
        if not exists(resolved + ("/" if t.endswith("/") else "")):
            report(doc, line, target)
            return

TOP = r"(?:src|include|tests|examples|docs|apps|experiments|tools|python|bench|fuzz|cmake)"
PATH_CHARS = r"(?:[\w.*<>+\-/]|\{[^{}\s`]*\})"
# Not preceded by a path character: "build/tests/x" or "https://h/src/x" are not repository paths.
REPO_PATH = re.compile(r"(?<![\w./~$@:-])(?:\./)?(" + TOP + r"/" + PATH_CHARS + r"*)")
PARENT_PATH = re.compile(r"(?<![\w./~$@:-])((?:\.\./)+" + PATH_CHARS + r"*)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML = re.compile(r"""<(?:a|img|source)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")

def clean(path):
    """Strips what ends a sentence: src/core/worker.cc, -> src/core/worker.cc"""
    while path and path[-1] in ".,;:" and not path.endswith(".."):
        path = path[:-1]
    return path

docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"),
                                                              recursive=True))
for path in docs:
    doc = os.path.relpath(path, root)
    if not os.path.isfile(path):
        report(doc, 0, doc)
        continue
    base = os.path.dirname(doc)
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = FENCE.match(line)
            if m:
                if fence is None:
                    fence = m.group(1)
                elif m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                    fence = None
                # The opening fence's info string holds no paths.
                continue
            if fence is None:
                # Links, outside code spans (`[a](b)` in code is text, not a link).
                prose = CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)
                found = list(LINK.finditer(prose)) + list(HTML.finditer(prose))
                found += [m for m in [REFERENCE.match(prose)] if m]
                for m in found:
                    # Checked against the file's folder here: blanked for the path checks below.
                    line = line[:m.start(1)] + " " * (m.end(1) - m.start(1)) + line[m.end(1):]
                for target in [m.group(1) for m in found]:
                    if not target or target.startswith("#"):
                        continue
                    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):  # http:, https:, mailto:
                        continue
                    target = urllib.parse.unquote(target.split("#", 1)[0].split("?", 1)[0])
                    check_relative(doc, number, target, base)
            for m in REPO_PATH.finditer(line):
                target = clean(m.group(1))
                if not all(exists(t) for t in expand_braces(target)):
                    report(doc, number, target)
            for m in PARENT_PATH.finditer(line):
                check_relative(doc, number, clean(m.group(1)), base)

for p in problems:
    print(p)
if problems:
    print(f"docs_links_test: {len(problems)} problem(s) in README.md and docs/", file=sys.stderr)
    sys.exit(1)
print(f"docs_links_test: every link and path in {len(docs)} files exists")
PYTHON
