"""The ctypes mirrors of include/dhs.h must match the C layouts exactly: a C
program compiled here prints sizeof and offsetof of every mirrored struct and
field, and the size of each field (and the enum values the package names), and each is compared."""
import os
import shutil
import subprocess
import ctypes

import pytest

import dhisparse as dhs
from dhisparse import _lib
from dhisparse.errors import Status

from conftest import ROOT

CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
INCLUDE = os.path.join(ROOT, "include")


def _enum_constants():
    out = {}
    for name, v in vars(Status).items():
        if not name.startswith("_"):
            out["DHS_" + name] = v
    for cls, prefix in ((dhs.Policy, "DHS_POLICY_"), (dhs.Resolver, "DHS_RESOLVER_"), (dhs.ReclaimOrder, "DHS_RECLAIM_"),
                        (dhs.ConsumerKind, "DHS_CONSUMER_"), (dhs.FaultKind, "DHS_FAULT_")):
        for m in cls:
            out[prefix + m.name] = int(m)
    for n in ("DHS_MAX_SOURCES", "DHS_MAX_CONSUMERS", "DHS_MAX_SCHEDULE_STEPS", "DHS_ALIGN", "DHS_IMPORT_DEVICE",
              "DHS_IMPORT_HOST"):
        out[n] = getattr(_lib, n)
    return out


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    if not CC:
        pytest.skip("no C compiler to measure the C layouts")
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "dhs.h"', '#include "dhs_cuda.h"', "int main(void) {"]
    for name, st in _lib.STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for f, _ in st._fields_:
            lines.append(f'printf("{name}.{f} %zu\\n", offsetof({name}, {f}));')
            lines.append(f'printf("{name}.{f}.size %zu\\n", sizeof((({name} *)0)->{f}));')
    for n in _enum_constants():
        lines.append(f'printf("{n} %lld\\n", (long long)({n}));')
    lines.append('printf("DHS_STATUS_LAST_ %lld\\n", (long long)DHS_STATUS_LAST_);')
    lines.append("return 0; }")
    d = tmp_path_factory.mktemp("layout")
    src, exe = d / "layout.c", d / "layout"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([CC, "-std=c11", "-Wall", "-Werror", "-I", INCLUDE, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.rsplit(" ", 1) for line in out.splitlines())}


@pytest.mark.parametrize("name", sorted(_lib.STRUCTS))
def test_struct_layout(c_layout, name):
    st = _lib.STRUCTS[name]
    assert ctypes.sizeof(st) == c_layout[name], f"sizeof({name})"
    for f, _ in st._fields_:
        assert getattr(st, f).offset == c_layout[f"{name}.{f}"], f"offsetof({name}, {f})"
        assert getattr(st, f).size == c_layout[f"{name}.{f}.size"], f"sizeof {name}.{f}"


def test_enum_values(c_layout):
    for n, v in _enum_constants().items():
        assert c_layout[n] == v, n


def test_every_status_has_its_exception(c_layout):
    last = c_layout["DHS_STATUS_LAST_"]
    seen = set()
    for s in list(range(last, 0)) + [1]:
        e = dhs.error_for(s, "x")
        assert type(e) is not dhs.DhsError, f"status {s} has no subclass"
        assert e.status == s and e.status_str == _lib.dhs_status_str(s).decode()
        seen.add(type(e))
    assert len(seen) == -last + 1


# ---------------------------------------------------------------- CUDA runtime structs the package mirrors
CUDA_INCLUDE = next((d for d in (os.path.join(os.environ.get("CUDA_HOME", "/nonexistent"), "include"),
                                 "/usr/local/cuda/include") if os.path.exists(os.path.join(d, "driver_types.h"))),
                    None)


def test_cuda_pointer_attributes_layout(tmp_path):
    """_cuda._PointerAttributes must be at least as large as struct cudaPointerAttributes: the runtime writes
    all of it (a 24-byte mirror of the 88-byte struct was the run-14 crash), and every field the package reads
    must sit at the C offset."""
    if not CC or not CUDA_INCLUDE:
        pytest.skip("no C compiler or no CUDA headers (driver_types.h) to measure cudaPointerAttributes")
    from dhisparse import _cuda
    src, exe = tmp_path / "pa.c", tmp_path / "pa"
    fields = [f for f, _ in _cuda._PointerAttributes._fields_]
    body = ['printf("size %zu\\n", sizeof(struct cudaPointerAttributes));']
    for f in fields:
        body.append(f'printf("{f} %zu\\n", offsetof(struct cudaPointerAttributes, {f}));')
        body.append(f'printf("{f}.size %zu\\n", sizeof(((struct cudaPointerAttributes *)0)->{f}));')
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <driver_types.h>\nint main(void) {\n"
                   + "\n".join(body) + "\nreturn 0; }\n")
    subprocess.run([CC, "-std=c11", "-I", CUDA_INCLUDE, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c = {k: int(v) for k, v in (line.rsplit(" ", 1) for line in out.splitlines())}
    assert ctypes.sizeof(_cuda._PointerAttributes) == c["size"], "sizeof(struct cudaPointerAttributes)"
    for f in fields:
        assert getattr(_cuda._PointerAttributes, f).offset == c[f], f"offsetof(cudaPointerAttributes, {f})"
        assert getattr(_cuda._PointerAttributes, f).size == c[f + ".size"], f"sizeof cudaPointerAttributes.{f}"
