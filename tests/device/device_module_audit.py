"""Lists every attribute torch's own code reads from a device module
(``getattr(torch, device_type)``, ``torch.get_device_module``,
``_get_device_module``, ``_get_device_handle``): the audit behind
docs/device_module_audit.md. Usage:
    python tests/device/device_module_audit.py .venv/lib/python3.11/site-packages/torch
Prints ``attribute count first-sites`` and writes /tmp/device_module_audit.json."""

import ast
import collections
import os
import sys

root = sys.argv[1]
SUB = [
    "utils",
    "amp",
    "optim",
    "nn/parallel",
    "distributed",
    "_dynamo",
    "testing",
    "autograd",
    "_functorch",
    "_prims",
    "_subclasses",
    "random.py",
    "serialization.py",
    "storage.py",
    "_utils.py",
    "__init__.py",
    "accelerator",
    "_inductor/runtime/benchmarking.py",
    "nn/attention",
    "backends",
]


def is_devmod_call(n):
    if not isinstance(n, ast.Call):
        return False
    f = n.func
    if (
        isinstance(f, ast.Name)
        and f.id == "getattr"
        and n.args
        and isinstance(n.args[0], ast.Name)
        and n.args[0].id == "torch"
    ):
        return not (len(n.args) > 1 and isinstance(n.args[1], ast.Constant))
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    return name in (
        "_get_device_module",
        "get_device_module",
        "_get_device_handle",
        "_get_available_device_type_module",
    )


hits = collections.defaultdict(set)
files = []
for s in SUB:
    p = os.path.join(root, s)
    if os.path.isfile(p):
        files.append(p)
    else:
        for d, _, fs in os.walk(p):
            files += [os.path.join(d, f) for f in fs if f.endswith(".py")]
for fn in files:
    try:
        tree = ast.parse(open(fn).read())
    except Exception:
        continue
    rel = os.path.relpath(fn, root)
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module, ast.ClassDef)):
            continue
        names = set()
        for n in ast.walk(func):
            if isinstance(n, ast.Assign) and is_devmod_call(n.value):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                    if isinstance(t, ast.Attribute):
                        names.add("self." + t.attr)
        for n in ast.walk(func):
            if isinstance(n, ast.Attribute):
                v = n.value
                key = (
                    v.id
                    if isinstance(v, ast.Name)
                    else (
                        "self." + v.attr
                        if isinstance(v, ast.Attribute)
                        and isinstance(v.value, ast.Name)
                        and v.value.id == "self"
                        else None
                    )
                )
                if (key and key in names) or is_devmod_call(v):
                    hits[n.attr].add(f"{rel}:{n.lineno}")
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Name)
                and n.func.id in ("getattr", "hasattr")
                and len(n.args) >= 2
                and isinstance(n.args[1], ast.Constant)
            ):
                v = n.args[0]
                key = v.id if isinstance(v, ast.Name) else None
                if (key and key in names) or is_devmod_call(v):
                    hits[n.args[1].value].add(f"{rel}:{n.lineno}")
import json

json.dump(
    {k: sorted(v) for k, v in sorted(hits.items())},
    open("/tmp/device_module_audit.json", "w"),
    indent=1,
)
for k, v in sorted(hits.items()):
    print(k, len(v), sorted(v)[:3])
