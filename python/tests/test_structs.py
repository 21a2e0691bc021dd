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
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "dhs.h"', '#include "dhs_plan.h"', '#include "dhs_cuda.h"', '#include "dhs_spec_auto.h"',
             "int main(void) {"]
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


# ---------------------------------------------------------------- function signatures
def _header_prototypes():
    """{name: (return type, [parameter types])} of every dhs_* function declared in the public headers."""
    import re
    text = ""
    for h in ("dhs.h", "dhs_plan.h", "dhs_cuda.h", "dhs_spec_auto.h"):
        with open(os.path.join(INCLUDE, h)) as f:
            text += f.read() + "\n"
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    out = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(dhs_\w+)\s*\(([^()]*)\)\s*;", text):
        ret = " ".join(m.group(1).split()).replace("typedef ", "")
        params = [p.strip() for p in m.group(3).split(",")]
        if params == ["void"]:
            params = []
        types = []
        for p in params:
            p = " ".join(p.replace("*", " * ").split())
            # drop the parameter name (the last identifier), keep the type
            toks = p.split(" ")
            if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) and toks[-1] not in ("const",):
                toks = toks[:-1]
            types.append(" ".join(toks))
        out[m.group(2)] = (" ".join(ret.replace("*", " * ").split()), types)
    return out


_ENUMS = {"dhs_status", "dhs_consumer_kind", "dhs_policy", "dhs_reclaim_order", "dhs_resolver", "dhs_fault_kind", "dhs_host_phase"}
_OPAQUE = {"dhs_backend", "dhs_ctx", "dhs_spec_auto"}
_FNPTRS = {"dhs_cuda_mark_fn"}  # function-pointer typedefs: bound as ctypes.CFUNCTYPE
_SCALARS = {"int32_t": ("i", 4), "uint32_t": ("u", 4), "int64_t": ("i", 8), "uint64_t": ("u", 8), "int": ("i", 4),
            "unsigned": ("u", 4), "size_t": ("u", 8), "char": ("i", 1), "double": ("f", 8)}


def _c_desc(t):
    """Normalised description of a C type: ('i'|'u', size), ('ptr', pointee) or ('struct', name)."""
    toks = [x for x in t.split(" ") if x and x != "const"]
    if toks and toks[-1] == "*":
        return ("ptr", _c_desc(" ".join(toks[:-1])))
    name = " ".join(toks)
    if name == "void":
        return ("void",)
    if name in _ENUMS:
        return ("i", 4)
    if name in _OPAQUE:
        return ("opaque",)
    if name in _FNPTRS:
        return ("fnptr",)
    if name in _SCALARS:
        return _SCALARS[name]
    if name in _lib.STRUCTS:
        return ("struct", name)
    raise AssertionError(f"test does not know the C type {t!r}")


def _py_desc(t):
    """The same description of a ctypes type (c_void_p / c_char_p are pointers to void / char)."""
    if t is None:
        return ("void",)
    if t is ctypes.c_void_p:
        return ("ptr", ("void",))
    if t is ctypes.c_char_p:
        return ("ptr", ("i", 1))
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return ("fnptr",)
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return ("ptr", _py_desc(t._type_))
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        return ("struct", t.__name__)
    if t is ctypes.c_double:
        return ("f", 8)
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData):
        code = t._type_
        signed = code in "bhilqc"
        return ("i" if signed else "u", ctypes.sizeof(t))
    raise AssertionError(f"unknown ctypes type {t!r}")


def _same(c, py):
    # an opaque handle (dhs_ctx *, dhs_backend *) is bound as c_void_p
    if c == ("ptr", ("opaque",)):
        return py == ("ptr", ("void",))
    if c[0] == "ptr" and py[0] == "ptr":
        if c[1] == ("opaque",):
            return py[1] == ("void",)
        if c[1] == ("void",):
            return py[1] == ("void",)
        return _same(c[1], py[1])
    return c == py


def test_header_parser_sees_every_function():
    protos = _header_prototypes()
    # a sample of each shape (so a parser that silently drops declarations fails here)
    for name in ("dhs_version", "dhs_arch_default", "dhs_request_import", "dhs_resolve_device", "dhs_tail_locations",
                 "dhs_check_invariants", "dhs_cuda_set_stream", "dhs_cuda_last_error"):
        assert name in protos, name
    assert protos["dhs_request_import"][1] == ["dhs_ctx *", "dhs_req", "int64_t", "const void * const *", "unsigned"]
    assert len(protos) >= 50


@pytest.mark.parametrize("name", sorted(_header_prototypes()))
def test_function_signature(name):
    """Every public C function is bound, with restype and argtypes matching the header: a missing argtypes
    entry lets ctypes pass a 64-bit pointer or int64 as a 32-bit int, a wrong restype truncates the result."""
    ret, params = _header_prototypes()[name]
    f = getattr(_lib, name, None)
    assert f is not None, f"dhisparse._lib does not bind {name}"
    assert f.argtypes is not None, f"{name}: argtypes unset"
    assert len(f.argtypes) == len(params), f"{name}: {len(f.argtypes)} argtypes, the header has {len(params)}"
    assert _same(_c_desc(ret), _py_desc(f.restype)), f"{name}: restype {f.restype} vs C {ret!r}"
    for i, (c, py) in enumerate(zip(params, f.argtypes)):
        assert _same(_c_desc(c), _py_desc(py)), f"{name}: argument {i} is {py} in Python, {c!r} in C"
