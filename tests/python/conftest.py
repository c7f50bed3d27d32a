# The tests import the package from the repository (runtime/python) and its library from
# the build tree unless TILE_LIBRARY or an installed wheel says otherwise.
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if os.environ.get("TILE_PY_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(ROOT, "runtime", "python"))
