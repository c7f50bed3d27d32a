"""The C library through cffi (ABI mode): the declarations are read from tile.h itself at
import time, so the binding cannot drift from the header (no hand-kept mirror).

Where things are found:
  libtile.so  $TILE_LIBRARY, else the copy inside this package (a wheel), else the
              repository's build/ (a checkout: PYTHONPATH=runtime/python)
  tile.h      beside that library's package copy (include/tile.h), else the repository's
              runtime/include/tile.h
"""
import os
import re

import cffi

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.abspath(os.path.join(_HERE, "..", "..", ".."))


def _first(paths):
    for p in paths:
        if p and os.path.isfile(p):
            return p
    return None


def library_path():
    env = os.environ.get("TILE_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise OSError("TILE_LIBRARY=%s: no such file" % env)
        return env
    p = _first([os.path.join(_HERE, "libtile.so"), os.path.join(_REPO, "build", "libtile.so"),
                os.path.join(_REPO, ".carry", "libtile.so")])
    if not p:
        raise OSError("libtile.so not found: set TILE_LIBRARY, install the wheel, or build the "
                      "repository (tools/setup.sh)")
    return p


def header_path():
    p = _first([os.path.join(_HERE, "include", "tile.h"),
                os.path.join(_REPO, "runtime", "include", "tile.h")])
    if not p:
        raise OSError("tile.h not found beside the package or in the repository")
    return p


def _strip_inline_bodies(text):
    """Removes `static inline` function definitions (cffi declares, it does not define)."""
    out, i = [], 0
    for m in re.finditer(r"static\s+inline\b", text):
        if m.start() < i:
            continue
        brace = text.find("{", m.end())
        semi = text.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            continue
        depth, j = 0, brace
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out.append(text[i:m.start()])
        i = j + 1
    out.append(text[i:])
    return "".join(out)


def cdef_from_header(text):
    """tile.h -> declarations cffi can parse: comments, preprocessor lines, C++ guards,
    TILE_API and inline helpers removed; the X-macro status list expanded."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = text.replace("\\\n", " ")
    statuses = re.findall(r"X\((\w+),\s*\"", text)
    if not statuses:
        raise RuntimeError("tile.h: the TILE_STATUS_MAP list was not found")
    consts = dict(re.findall(r"^\s*#\s*define\s+(\w+)\s+(\d+)\s*$", text, flags=re.M))
    lines, skip = [], 0
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("#"):
            if re.match(r"#\s*if(def)?\b.*__cplusplus", s):
                skip += 1
            elif skip and re.match(r"#\s*endif", s):
                skip -= 1
            elif skip and re.match(r"#\s*if", s):
                skip += 1
            continue
        if not skip:
            lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"\bTILE_STATUS_MAP\s*\(\s*TILE_X\s*\)",
                  " ".join("TILE_%s," % s for s in statuses), text)
    text = re.sub(r"\bTILE_API\b", "", text)
    for name, value in consts.items():  # array sizes such as TILE_MAX_RANK
        text = re.sub(r"\b%s\b" % name, value, text)
    return _strip_inline_bodies(text)


ffi = cffi.FFI()
with open(header_path()) as _f:
    ffi.cdef(cdef_from_header(_f.read()))
lib = ffi.dlopen(library_path())
