"""The package installs with pip offline (in-tree build backend, no build
dependencies) and the installed copy imports and finds the library; the
loader's order is honoured; versions agree."""
import os
import subprocess
import sys
import tomllib

import pytest

import dhisparse as dhs

from conftest import PY


def test_versions_agree():
    with open(os.path.join(PY, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["version"] == dhs.__version__ == dhs.library_version


def _run(code, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DHS_LIBRARY")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)


def test_pip_install_offline(tmp_path):
    pytest.importorskip("pip")
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps",
                        "--disable-pip-version-check", "--target", str(target), PY], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "dhisparse" / "core.py").exists()
    code = ("import dhisparse as d; print(d.__file__); print(d.lib_path); "
            "print(d.Context(d.Arch(), d.Config(device_bytes=1<<22, max_requests=1), d.CpuBackend()).mem().pool_bytes)")
    r = _run(code, {"PYTHONPATH": str(target), "DHS_LIBRARY": dhs.lib_path}, tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")
    assert out[0].startswith(str(target)) and out[1] == dhs.lib_path and int(out[2]) > 0


def test_dhs_library_env_is_honoured(tmp_path):
    r = _run("import dhisparse", {"PYTHONPATH": PY, "DHS_LIBRARY": str(tmp_path / "nope.so")}, tmp_path)
    assert r.returncode != 0 and "nope.so" in r.stderr and "DHS_LIBRARY" in r.stderr
    r = _run("import dhisparse as d; print(d.lib_path)", {"PYTHONPATH": PY, "DHS_LIBRARY": dhs.lib_path}, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == dhs.lib_path
