#!/usr/bin/env python3
"""Checks that src/ keeps its sizes: no file over 500 lines, no function over
80 (STYLE.md; issue 43). A function's length runs from the line of its
opening brace to that of its closing one; a lambda counts with the function
around it. ctest runs it as Layers.FilesAndFunctionsStaySmall.

    python3 tests/layers/check_sizes.py SOURCE_DIR [MAX_FILE [MAX_FUNCTION]]

The function finder reads C++ without parsing it: comments, strings and
character literals are blanked first; a `{` opens a function when the text
before it (back to the last `;`, `{` or `}`) ends in a parameter list with
optional qualifiers or a constructor's initializers, and no function is open.
"""
import re
import sys

from sources import source_files

SIGNATURE = re.compile(
    r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(final)?\s*(->\s*[\w:<>,\s*&]+)?\s*(:[^;{]*)?$", re.S)
NOT_A_FUNCTION = re.compile(r"^\s*(namespace|struct|class|enum|union|if|for|while|switch|catch)\b")


def blank(text):
    """Comments, strings and character literals become spaces (newlines kept)."""
    keep_lines = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])+\'', re.S)
    return pattern.sub(keep_lines, text)


def functions(text):
    """(name, first line, last line) of every function defined in `text`."""
    text = blank(text)
    found, stack = [], []  # stack: (is_function, line, name)
    statement, line = 0, 1
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            before = text[statement:i].strip()
            last = before.split("\n")[-1] if before else ""
            # Whitespace runs collapsed: the signature's optional parts, each
            # around \s*, backtrack over long runs (a macro's aligned
            # continuation backslashes took 24 s).
            signature = SIGNATURE.search(" ".join(before.split())) is not None
            opens = (not any(f for f, _, _ in stack) and signature
                     and NOT_A_FUNCTION.match(last) is None and "=" not in before.split("(")[0])
            names = re.findall(r"([\w:~]+)\s*\(", before)
            stack.append((opens, line, names[0] if names else "?"))
            statement = i + 1
        elif ch == "}":
            if stack:
                is_function, start, name = stack.pop()
                if is_function:
                    found.append((name, start, line))
            statement = i + 1
        elif ch == ";":
            statement = i + 1
    return found


def main(root, max_file=500, max_function=80):
    errors = []
    for _, rel, path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n")
        if lines > max_file:
            errors.append(f"{rel}: {lines} lines (at most {max_file}): split it by concept")
        for fn, first, last in functions(text):
            if last - first + 1 > max_function:
                errors.append(f"{rel}:{first}: {fn} is {last - first + 1} lines (at most {max_function})")
    for e in sorted(errors):
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3, 4):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:])))
