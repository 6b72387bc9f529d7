"""numpy is only the door in and out: no stage module calls a numpy function that computes.

Every `np.<name>` used in the package (every module, sub-packages included; the tests aside) must be
on the list of conversion/type helpers below."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts)
OTHER_PACKAGES = {"common", "stage1_ndarray", "stage2_autograd", "stage3_compiler"} - {PACKAGE.name}
# The modules at the door: data in (Tensor(array), a device's upload), data out (.numpy(), downloads).
EDGES = {"tensor.py", "buffer.py", "dtype.py", "movement.py", "cuda/buffer.py", "cuda/backend.py", "cuda/runtime.py",
         "cuda/gemm.py", "nn/state.py"}

# Converting data in and out, and naming types. Nothing here does arithmetic on values.
ALLOWED = {"asarray", "ascontiguousarray", "array", "frombuffer", "empty", "zeros", "dtype", "ndarray", "generic",
           "integer", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
           "float32", "float64"}


def numpy_uses(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "np"}


def test_only_conversion_helpers_of_numpy_are_used():
    used = {}
    for path in MODULES:
        extra = numpy_uses(path) - ALLOWED
        if extra:
            used[str(path.relative_to(PACKAGE))] = sorted(extra)
    assert used == {}


def test_numpy_is_imported_only_by_the_edge_modules():
    importers = set()
    for path in MODULES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "numpy" for a in node.names):
                importers.add(str(path.relative_to(PACKAGE)))
            if isinstance(node, ast.ImportFrom) and node.module == "numpy":
                importers.add(str(path.relative_to(PACKAGE)))
    assert importers <= EDGES


def test_the_stage_imports_no_other_stage_and_not_common():
    for path in MODULES:
        text = path.read_text()
        for name in OTHER_PACKAGES:
            assert f"import {name}" not in text and f"from {name}" not in text, path.name
