#!/usr/bin/env python3
"""Checks that no function in src/ or apps/ is longer than LIMIT lines without a reason written
beside it: past that a function does several things (the house rule). A reason is a comment line
in the block right above the function that starts with "Long:" ("// Long: one table of cases, read
top to bottom"). A function is a body whose head ends in a parameter list (and
qualifiers or a constructor's initializers); lambdas and control blocks are not functions, and a
function's lines run from its head's first line to its closing brace. One line per violation;
exit 1 if any. Usage: check_function_sizes.py [SOURCE-DIR]"""
import re
import sys
from pathlib import Path

LIMIT = 80
CONTROL = re.compile(r"\b(if|for|while|switch|catch|else|do|try|namespace|struct|class|union|enum)\b")
NAME = re.compile(r"(~?[A-Za-z_]\w*(?:::~?[A-Za-z_]\w*)*|operator\s*\S+?)\s*\($")


def code_only(text: str) -> str:
    """`text` with comments, string and character literals blanked (newlines kept), so that the
    braces left are the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text: str):
    """(name, first line, last line) of each function body in `text`, outermost ones only."""
    code = code_only(text)
    found, stack = [], []  # stack: (is_function, name, first line) per open brace
    head_start = 0
    for i, c in enumerate(code):
        if c in ";}":
            if c == "}" and stack:
                is_fn, name, first = stack.pop()
                if is_fn:
                    found.append((name, first, code.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            inside_fn = any(s[0] for s in stack)
            is_fn = False
            name = ""
            if not inside_fn and "[" not in head and not CONTROL.search(head) and "=" not in head.split("(")[0]:
                # The parameter list: the first "(" at depth 0 whose ")" is followed only by
                # qualifiers, a trailing return type or a constructor's initializers.
                m = re.search(r"\)\s*(const|noexcept|override|final|mutable|->[^{]*|\s)*(:[^{]*)?$", head, re.S)
                open_at = head.find("(")
                if m and open_at > 0:
                    before = head[:open_at + 1].rstrip()
                    nm = NAME.search(before.replace("\n", " "))
                    if nm:
                        is_fn = True
                        name = nm.group(1)
            first = code.count("\n", 0, head_start + len(head) - len(head.lstrip())) + 1
            stack.append((is_fn, name, first))
            head_start = i + 1
    return found


def reasoned(lines, first: int) -> bool:
    """Whether the comment block right above line `first` (1-based) has a line starting "Long:"."""
    k = first - 2
    while k >= 0 and lines[k].strip().startswith("//"):
        if lines[k].strip()[2:].strip().startswith("Long:"):
            return True
        k -= 1
    return False


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    errors = []
    for path in sorted(p for d in ("src", "apps") for p in (root / d).rglob("*") if p.suffix in (".cc", ".h")):
        text = path.read_text()
        lines = text.split("\n")
        rel = path.relative_to(root).as_posix()
        for name, first, last in functions(text):
            n = last - first + 1
            if n > LIMIT and not reasoned(lines, first):
                errors.append(f"{rel}:{first}: {name} is {n} lines, more than {LIMIT}: split it, or say why it is "
                              f"long in a comment line above it that starts with 'Long:'")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
