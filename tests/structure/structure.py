"""The source tree's shape, measured: file and function sizes, and the
folder include graph of src/ against the map in docs/design.md.

  python3 tests/structure/structure.py            a report (largest files and
                                                  functions, the folder graph)
The test beside it (structure_test.py) holds the tree to the limits the
project set itself: no non-test source file over 800 lines, no function over
120, every folder on the map, every include allowed by it, no cycle.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SRC = os.path.join(ROOT, "src")

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120


def source_files():
    """Every non-test C++ file under src/, as paths relative to ROOT."""
    out = []
    for folder, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith((".cc", ".h")) or "_test" in f or "for_test" in f:
                continue
            out.append(os.path.relpath(os.path.join(folder, f), ROOT))
    return sorted(out)


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def strip_code(text):
    """The text with comments, string and character literals blanked (their
    newlines kept), so that braces and parentheses in them do not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c + "\n" * text.count("\n", i, j))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(lines, first line number, name) of each function body defined at
    namespace or class scope in the file; lambdas and blocks inside a
    function are part of it."""
    code = strip_code(read(path))
    found = []
    stack = []  # "scope" (namespace, class, extern) or "body" (a function) or "data"
    header_start = 0
    body_start = None
    for i, c in enumerate(code):
        if c in ";":
            if not stack or stack[-1] == "scope":
                header_start = i + 1
        elif c == "{":
            header = code[header_start:i]
            inside_function = any(k != "scope" for k in stack)
            if inside_function:
                stack.append("data")
            elif re.search(r"\b(namespace|extern)\b", header) or (
                    re.search(r"\b(class|struct|union|enum)\b", header) and "(" not in header):
                stack.append("scope")
            elif ")" in header and "=" not in header.split(")")[-1]:
                stack.append("body")
                body_start = (i, header)
            else:
                stack.append("data")
            header_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "body" and body_start:
                start, header = body_start
                first = code.count("\n", 0, start) + 1
                last = code.count("\n", 0, i) + 1
                name = re.sub(r"\s+", " ", header.strip())[:90]
                found.append((last - first, first, name))
                body_start = None
            if not stack or stack[-1] == "scope":
                header_start = i + 1
    return found


INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def folder_of(path):
    parts = path.split(os.sep)
    return parts[1] if len(parts) > 2 else ""


def include_graph():
    """{folder: {folder it includes}} over src/'s non-test files."""
    graph = {}
    for path in source_files():
        f = folder_of(path)
        deps = graph.setdefault(f, set())
        for target in INCLUDE.findall(read(path)):
            if target != f and os.path.isdir(os.path.join(SRC, target)):
                deps.add(target)
    return graph


def cycles(graph):
    """The graph's strongly connected components of more than one folder."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def design_map():
    """{folder: set of folders it may use, or None for "all"} from the table
    "Components and their seams" in docs/design.md: a row's first cell names
    its folders (`a/`, `b/`), its last says what they may use."""
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Components and their seams", 1)[1].split("\n## ", 1)[0]
    folders = set(os.listdir(SRC))
    allowed = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        owners = re.findall(r"`([a-z_]+)/`", cells[0])
        may = cells[-1]
        if re.fullmatch(r"all", may):
            uses = None
        else:
            uses = {w for w in re.findall(r"[a-z_]+", may.split("—")[0]) if w in folders}
        for o in owners:
            allowed[o] = uses
    return allowed


def report():
    files = sorted(((len(read(p).splitlines()), p) for p in source_files()), reverse=True)
    print("Largest non-test source files:")
    for n, p in files[:5]:
        print(f"  {n:5d}  {p}")
    funcs = sorted(((n, p, first, name) for p in source_files() if p.endswith(".cc")
                    for n, first, name in functions(p)), reverse=True)
    print("Longest functions:")
    for n, p, first, name in funcs[:5]:
        print(f"  {n:5d}  {p}:{first}  {name}")
    graph = include_graph()
    print("Folder includes (folder -> folders it includes):")
    for f in sorted(graph):
        print(f"  {f or '(src)'} -> {', '.join(sorted(graph[f])) or '-'}")
    print("Cycles:", cycles(graph) or "none")


if __name__ == "__main__":
    report()
    sys.exit(0)
