"""pytest setup: the package is imported from python/ of this repository (no
install needed); libdhs.so is found as dhisparse/_lib.py says (DHS_LIBRARY,
next to the package, build/ of the repository, the system loader). A missing
library is an error, never a skip."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = os.path.dirname(HERE)
ROOT = os.path.dirname(PY)
if PY not in sys.path:
    sys.path.insert(0, PY)

import dhisparse  # noqa: E402  (fails the session when the library cannot be loaded)


def pytest_report_header(config):
    return f"dhisparse {dhisparse.__version__}: {dhisparse.lib_path} (library {dhisparse.library_version})"
