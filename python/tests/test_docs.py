"""docs/INTEGRATION.md includes its C and Python examples verbatim: each fenced
block preceded by `<!-- file: PATH -->` must equal that file. The Python
example runs; the C example is compiled against this build's libdhs.so and
runs (tests/consumer/run.sh also builds it against an installed package)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import dhisparse as dhs

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "INTEGRATION.md")
BLOCK = re.compile(r"<!-- file: (\S+) -->\n```[a-z]*\n(.*?)```\n", re.S)


def test_doc_examples_are_the_files():
    text = open(DOC).read()
    blocks = BLOCK.findall(text)
    assert {p for p, _ in blocks} == {"tests/consumer/consumer.c", "python/examples/quickstart.py"}
    for path, body in blocks:
        with open(os.path.join(ROOT, path)) as f:
            assert body == f.read(), f"docs/INTEGRATION.md's copy of {path} differs from the file"


def test_python_example_runs():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["DHS_LIBRARY"] = dhs.lib_path
    r = subprocess.run([sys.executable, os.path.join(ROOT, "python", "examples", "quickstart.py")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all rows exact" in r.stdout


def test_c_example_runs(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    libdir = os.path.dirname(dhs.lib_path)  # dhisparse reports the mapped file, however it was found
    assert os.path.isabs(dhs.lib_path) and os.path.exists(dhs.lib_path), dhs.lib_path
    exe = tmp_path / "consumer"
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"),
                    os.path.join(ROOT, "tests", "consumer", "consumer.c"), dhs.lib_path, f"-Wl,-rpath,{libdir}",
                    "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rows checked" in r.stdout and r.stdout.rstrip().endswith("ok")


def test_lib_path_is_the_mapped_file():
    """However the package found libdhs (DHS_LIBRARY, beside it, build/, or the loader's search path by bare
    soname), lib_path names the file the loader mapped, so consumers can link against it."""
    from dhisparse import _lib
    assert os.path.isabs(dhs.lib_path) and os.path.exists(dhs.lib_path)
    # the soname alone, as the loader route gives it, resolves to the mapped file
    p = _lib._loaded_path(os.path.basename(dhs.lib_path))
    assert os.path.isabs(p) and os.path.exists(p), p

