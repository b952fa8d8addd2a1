"""The layering rules of the source tree, checked on the source itself so that they cannot
break silently:

- Python (torchneuron/): no import cycle between files, and none between folders
  (imports between a package and its own subpackages left out: a package's
  ``__init__`` gathers its children and children use their parent's shared modules);
  read with ``ast``, every import counted, also those inside functions;
- C++ (csrc/): no include cycle between folders; aten/ includes nothing of python/,
  distributed/ or profiler/; runtime/ includes no PyTorch and no other folder.

"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "torchneuron"
CSRC = REPO / "csrc"
# Built by CMake (TORCH_EXTENSION_NAME=_C), absent from a fresh checkout: a leaf.
EXTENSIONS = {"torchneuron._C"}


def _module(p: Path) -> str:
    parts = list(p.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _python_graph() -> tuple[dict[str, set[str]], dict[str, Path]]:
    """module -> the torchneuron modules it imports; module -> its file."""
    files = {_module(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:  # a submodule, else a name of the package
                    full = f"{base}.{a.name}"
                    found.add(full if full in files or full in EXTENSIONS else base)
        deps = set()
        for d in found:
            while d and d not in files and d not in EXTENSIONS:
                d = d.rpartition(".")[0]
            if d in files and d != name:
                deps.add(d)
        graph[name] = deps
    return graph, files


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_python_files_import_no_cycle():
    graph, _ = _python_graph()
    cycles = _cycles(graph)
    assert not cycles, cycles


def test_python_folders_import_no_cycle():
    graph, files = _python_graph()
    folder = {m: p.parent.relative_to(REPO).as_posix() for m, p in files.items()}
    folders: dict[str, set[str]] = {}
    for a, deps in graph.items():
        for b in deps:
            fa, fb = folder[a], folder[b]
            if fa == fb or fa.startswith(fb + "/") or fb.startswith(fa + "/"):
                continue  # within a folder, or between a package and its own subpackage
            folders.setdefault(fa, set()).add(fb)
    assert folders, "no import between folders found: the graph is not read"
    assert not _cycles(folders), folders


def _includes() -> dict[str, list[tuple[Path, str, str]]]:
    """csrc folder -> (file, "<" or '"', path) of each #include."""
    out: dict[str, list] = {}
    for p in sorted(CSRC.rglob("*")):
        if p.suffix not in (".cpp", ".h"):
            continue
        for line in p.read_text().splitlines():
            m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
            if m:
                out.setdefault(p.relative_to(CSRC).parts[0], []).append((p, m.group(1), m.group(2)))
    return out


def _folder_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for f, incs in _includes().items():
        for p, kind, inc in incs:
            top = inc.split("/")[0]
            if kind == '"' and (CSRC / inc).exists() and top != f:
                edges.setdefault(f, set()).add(top)
    return edges


def test_csrc_folders_include_no_cycle():
    edges = _folder_edges()
    assert edges.get("python"), "python/ includes no layer: the graph is not read"
    assert not _cycles(edges), edges


def test_aten_includes_no_layer_above_it():
    assert not _folder_edges().get("aten", set()) & {"python", "distributed", "profiler"}


def test_runtime_includes_no_pytorch():
    bad = [
        f"{p.relative_to(REPO)}: {inc}"
        for p, kind, inc in _includes()["runtime"]
        if inc.split("/")[0] in ("ATen", "c10", "torch", "caffe2", "pybind11", "Python.h")
        or (kind == '"' and inc.split("/")[0] in ("aten", "python", "distributed", "profiler"))
    ]
    assert not bad, bad
