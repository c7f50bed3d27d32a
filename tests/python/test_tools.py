"""The tools' hand-kept mirrors of tile.h stay in step with the header: tools/bench_attention.py
declares the C structures for ctypes (it runs against a carried libtile.so without the
package), so a field added to tile.h without it there would make the benchmark pass garbage.
Compiles a layout program against runtime/include/tile.h and compares (skipped without a C
compiler)."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_bench_attention_ctypes_layouts_match_tile_h():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import bench_attention
    finally:
        sys.path.pop(0)
    bench_attention.check_layout()  # the hardcoded sizes agree with the ctypes classes
    ok, msg = bench_attention.check_layout_live(os.path.join(ROOT, "runtime", "include"))
    if ok is None:
        pytest.skip(msg)
    assert ok, msg
