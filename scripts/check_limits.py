#!/usr/bin/env python3
"""The house's size limits, checked: every non-test source file within 600 lines, and every
function of the product's libraries (the top-level library folders) within 80 lines.

A C++ function is a definition whose signature starts in column 0 and whose body ends at the
next `}` in column 0 (the code's clang-format style); its length counts from the signature's
first line to that brace. Limits that the code still breaks are listed in
scripts/limits_allowlist.txt with the size they had when listed: such an entry may shrink but
not grow, and anything past a limit that is not listed fails the check. Exit 0 when every
limit holds, 1 listing what breaks them, 2 for bad arguments.

Usage: scripts/check_limits.py [--root=DIR] [--list]   (--list: print every size over a limit)
"""
import os
import re
import sys

FILE_LIMIT = 600
FUNCTION_LIMIT = 80
LIBRARIES = ("base", "ops", "data", "models", "profiler", "runtime", "worker", "ps", "chief",
             "monitor")
SOURCE_EXTENSIONS = (".cc", ".h", ".cu", ".py", ".sh")
SKIP_DIRS = {"tests", "build", "third_party", ".git", "__pycache__"}
SIGNATURE = re.compile(r"^[A-Za-z_].*[(,]\s*$|^[A-Za-z_].*\)\s*(const)?\s*(override)?\s*\{\s*$")


def source_files(root):
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if top in SKIP_DIRS or top.startswith("build") or not os.path.isdir(path):
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS) and "_test." not in name:
                    yield os.path.relpath(os.path.join(folder, name), root)


def functions(lines):
    """(first line, length, signature) of each column-0 definition."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if SIGNATURE.match(line) and not line.startswith(("#", "namespace", "//", "class ",
                                                          "struct ", "enum ", "template")):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{"):
                if lines[j].rstrip().endswith(";"):
                    break  # a declaration
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                k = j + 1
                while k < len(lines) and not lines[k].startswith("}"):
                    k += 1
                yield i + 1, k - i + 1, line.strip()[:70]
                i = k + 1
                continue
        i += 1


def measure(root):
    """{key: size} for every file and library function past its limit."""
    over = {}
    for path in source_files(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if len(lines) - 1 > FILE_LIMIT:
            over[f"file {path}"] = len(lines) - 1
        if path.split(os.sep)[0] in LIBRARIES and path.endswith((".cc", ".h", ".cu")):
            for first, length, signature in functions(lines):
                if length > FUNCTION_LIMIT:
                    name = re.sub(r"\s+", " ", signature.split("(")[0]).split(" ")[-1]
                    over[f"function {path}:{name}"] = length
    return over


def read_allowlist(path):
    allowed = {}
    if not os.path.exists(path):
        return allowed
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, size = line.rsplit(" ", 1)
        allowed[key] = int(size)
    return allowed


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    listing = False
    for arg in argv:
        if arg.startswith("--root="):
            root = arg.split("=", 1)[1]
        elif arg == "--list":
            listing = True
        else:
            print(f"check_limits: unknown argument '{arg}' (see the usage at the top)",
                  file=sys.stderr)
            return 2
    over = measure(root)
    if listing:
        for key, size in sorted(over.items()):
            print(f"{key} {size}")
        return 0
    allowed = read_allowlist(os.path.join(root, "scripts", "limits_allowlist.txt"))
    failures = []
    for key, size in sorted(over.items()):
        limit = FILE_LIMIT if key.startswith("file ") else FUNCTION_LIMIT
        if key not in allowed:
            failures.append(f"{key}: {size} lines, over the limit of {limit}")
        elif size > allowed[key]:
            failures.append(f"{key}: {size} lines, grew past the {allowed[key]} it is allowed "
                            f"(limit {limit})")
    for key in sorted(set(allowed) - set(over)):
        print(f"check_limits: {key} is within its limit now: drop it from "
              "scripts/limits_allowlist.txt")
    if failures:
        print("check_limits: " + "\n  ".join(["sizes past the house's limits:"] + failures),
              file=sys.stderr)
        return 1
    print(f"check_limits: files within {FILE_LIMIT} lines and library functions within "
          f"{FUNCTION_LIMIT}, but for {len(over)} listed in scripts/limits_allowlist.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
