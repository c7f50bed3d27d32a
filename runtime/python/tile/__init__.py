"""tile: compile and run .tile kernels from Python.

    import tile, torch
    gemm = tile.compile(tile.lib_path("gemm"), kernel="gemm")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
    gemm(a, b, c)                     # on torch's current stream, shapes bound from the tensors

Arguments are the kernel's parameters in order, or by name (`gemm(A=a, B=b, C=c)`); scalars
by value. Tensors may be PyTorch tensors, anything with `__cuda_array_interface__` or
`__dlpack__` (CuPy, JAX, ...), or NumPy arrays; host arrays run on the CPU interpreter, device
arrays on the GPU. A kernel object compiles once per device and is cached (in memory and in
the on-disk cache). Errors raise `tile.TileError` with the library's diagnostics
(file:line:col) attached. `tile.torch.custom_op` registers a kernel as a `torch.library` op
that works under `torch.compile`.
"""
import os
import struct
import threading
from collections import namedtuple

from ._ffi import ffi, lib, library_path, header_path

__all__ = ["TileError", "Diagnostic", "Param", "Kernel", "TuneResult", "compile", "emit",
           "lib_path", "version", "cache_path", "cache_clear", "cache_entries", "device_info",
           "synchronize"]

_HERE = os.path.dirname(os.path.abspath(__file__))

# ---- dtypes ---------------------------------------------------------------------------------
_DTYPE_NAMES = {lib.TILE_BOOL: "bool", lib.TILE_I8: "i8", lib.TILE_I16: "i16", lib.TILE_I32: "i32",
                lib.TILE_I64: "i64", lib.TILE_F16: "f16", lib.TILE_BF16: "bf16", lib.TILE_F32: "f32",
                lib.TILE_F64: "f64", lib.TILE_F8E4M3: "f8e4m3", lib.TILE_F8E5M2: "f8e5m2",
                lib.TILE_U32: "u32"}
_DTYPE_BY_NAME = {v: k for k, v in _DTYPE_NAMES.items()}
# array-interface type strings (NumPy, __cuda_array_interface__); bf16 has none
_TYPESTR = {"b1": lib.TILE_BOOL, "i1": lib.TILE_I8, "i2": lib.TILE_I16, "i4": lib.TILE_I32,
            "i8": lib.TILE_I64, "u4": lib.TILE_U32, "f2": lib.TILE_F16, "f4": lib.TILE_F32,
            "f8": lib.TILE_F64}
# DLPack (code, bits) -> tile dtype: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
_DLPACK = {(0, 8): lib.TILE_I8, (0, 16): lib.TILE_I16, (0, 32): lib.TILE_I32, (0, 64): lib.TILE_I64,
           (1, 32): lib.TILE_U32,
           (2, 16): lib.TILE_F16, (2, 32): lib.TILE_F32, (2, 64): lib.TILE_F64,
           (4, 16): lib.TILE_BF16, (6, 8): lib.TILE_BOOL, (1, 8): lib.TILE_BOOL}

ffi.cdef("""
typedef struct { int device_type; int device_id; } tile_py_dldevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } tile_py_dldtype;
typedef struct {
  void *data; tile_py_dldevice device; int ndim; tile_py_dldtype dtype;
  int64_t *shape; int64_t *strides; uint64_t byte_offset;
} tile_py_dltensor;
typedef struct { uintptr_t data; int dtype; unsigned rank; int64_t shape[4]; int64_t strides[4]; } tile_py_tensor;
typedef struct { int kind; union { tile_py_tensor tensor; int64_t i; double f; } u; } tile_py_arg;
""")
# tile_py_arg is tile_arg with an integer data pointer, so that an argument array is built in
# one call from Python ints; the layouts are checked here, against the header's declarations
for _f in ("kind", "u"):
    assert ffi.offsetof("tile_py_arg", _f) == ffi.offsetof("tile_arg", _f)
for _f in ("data", "dtype", "rank", "shape", "strides"):
    assert ffi.offsetof("tile_py_tensor", _f) == ffi.offsetof("tile_tensor", _f)
assert ffi.sizeof("tile_py_arg") == ffi.sizeof("tile_arg")
_ARG_TENSOR, _ARG_INT, _ARG_FLOAT = lib.TILE_ARG_TENSOR, lib.TILE_ARG_INT, lib.TILE_ARG_FLOAT
_FLOAT_NAMES = frozenset(("f32", "f16", "bf16", "f64"))
# the fast launch path writes tile_arg as 64-bit words: kind | data | dtype, rank | shape[4] |
# strides[4] (little-endian: the int32 dtype in the low half, rank in the high half)
_ARG_WORDS = ffi.sizeof("tile_arg") // 8
_FAST_LAYOUT = (ffi.sizeof("tile_arg") == 88 and ffi.offsetof("tile_arg", "u") == 8
                and ffi.offsetof("tile_tensor", "dtype") == 8 and ffi.offsetof("tile_tensor", "rank") == 12
                and ffi.offsetof("tile_tensor", "shape") == 16 and ffi.offsetof("tile_tensor", "strides") == 48
                and ffi.sizeof("tile_dtype") == 4 and ffi.sizeof("tile_arg_kind") == 4
                and __import__("sys").byteorder == "little")
_ZEROS9 = (0,) * 9
_ZEROS8 = (0,) * 8
_TORCH_TENSOR = [None]  # torch.Tensor, once torch is in use


def _torch_dtypes():
    import torch
    table = {torch.bool: lib.TILE_BOOL, torch.int8: lib.TILE_I8, torch.int16: lib.TILE_I16,
             torch.int32: lib.TILE_I32, torch.int64: lib.TILE_I64, torch.float16: lib.TILE_F16,
             torch.bfloat16: lib.TILE_BF16, torch.float32: lib.TILE_F32, torch.float64: lib.TILE_F64}
    for name, code in (("float8_e4m3fn", lib.TILE_F8E4M3), ("float8_e5m2", lib.TILE_F8E5M2),
                       ("uint32", lib.TILE_U32)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = code
    return table


_torch_table = None
_torch_stream_fn = None


def _torch_current_stream(index):
    """torch's current CUDA stream handle on device `index` (the raw getter: a microsecond
    cheaper than torch.cuda.current_stream(), which builds a Stream object)."""
    global _torch_stream_fn
    if _torch_stream_fn is None:
        import torch
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _torch_stream_fn = raw or (lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _torch_stream_fn(index)


def torch_dtype(dtype_name):
    """The torch dtype of a tile dtype name ("f16" -> torch.float16)."""
    global _torch_table
    if _torch_table is None:
        _torch_table = _torch_dtypes()
    code = _DTYPE_BY_NAME[dtype_name]
    for k, v in _torch_table.items():
        if v == code:
            return k
    raise TypeError("no torch dtype for %s" % dtype_name)


# ---- errors ---------------------------------------------------------------------------------
Diagnostic = namedtuple("Diagnostic", "severity file line col length message code")
Diagnostic.__str__ = lambda d: "%s:%d:%d: %s: %s" % (d.file, d.line, d.col, d.severity, d.message)


class TileError(RuntimeError):
    """A call into the library failed. `status` is the tile_status name ("COMPILE",
    "BAD_LAUNCH", ...), `code` the stable error code of the first error ("CONSTRAINT",
    "UNDECLARED", ...; None when there is none), `diagnostics` the compiler's messages."""

    def __init__(self, status, message, code=None, diagnostics=()):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code
        self.diagnostics = list(diagnostics)


def _s(p):
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else None


def _error(ctx, st, what=None):
    status = _s(lib.tile_status_name(st))
    if status and status.startswith("TILE_"):
        status = status[5:]
    msg = _s(lib.tile_errmsg(ctx)) if ctx is not None else None
    msg = msg or _s(lib.tile_strerror(st))
    diags = []
    if ctx is not None:
        d = ffi.new("tile_diagnostic *")
        for i in range(lib.tile_diag_count(ctx)):
            if lib.tile_diag_get(ctx, i, d) == lib.TILE_OK:
                diags.append(Diagnostic(("error", "warning", "note")[d.severity], _s(d.file) or "",
                                        d.line, d.col, d.len, _s(d.message) or "", _s(d.code)))
    code = _s(lib.tile_errcode(ctx)) if ctx is not None else None
    return TileError(status, ("%s: %s" % (what, msg)) if what else msg, code, diags)


# ---- contexts -------------------------------------------------------------------------------
class _Context:
    """One tile_context (used by one thread at a time: calls hold its lock)."""

    def __init__(self, cuda_device=0):
        opts = ffi.new("tile_context_options *")
        opts.cuda_device = cuda_device
        out = ffi.new("tile_context **")
        st = lib.tile_context_create(opts, out)
        if st != lib.TILE_OK:
            raise _error(None, st, "tile_context_create")
        self.ptr = ffi.gc(out[0], lib.tile_context_destroy)
        self.lock = threading.RLock()
        self.cuda_device = cuda_device


_contexts = {}
_contexts_lock = threading.Lock()


def _context(device, index=0):
    key = ("cpu", 0) if device == "cpu" else ("cuda", index or 0)
    c = _contexts.get(key)
    if c is None:
        with _contexts_lock:
            c = _contexts.get(key)
            if c is None:
                c = _contexts[key] = _Context(key[1])
    return c


# ---- arguments ------------------------------------------------------------------------------
class _Tensor:
    __slots__ = ("device", "index", "ptr", "dtype", "shape", "strides", "keep", "stream")

    def __init__(self, device, index, ptr, dtype, shape, strides, keep=None, stream=None):
        self.device, self.index, self.ptr, self.dtype = device, index, ptr, dtype
        self.shape, self.strides, self.keep, self.stream = shape, strides, keep, stream


def _from_interface(obj, iface, device):
    ts = iface["typestr"]
    dt = _TYPESTR.get(ts[1:])
    if dt is None:
        raise TypeError("unsupported element type %r" % ts)
    shape = tuple(int(s) for s in iface["shape"])
    item = int(ts[2:])
    if iface.get("strides") is None:
        strides = _contiguous(shape)
    else:
        strides = []
        for s in iface["strides"]:
            if s % item:
                raise ValueError("a stride of %d bytes is not a whole number of elements" % s)
            strides.append(s // item)
    # the interface does not say which GPU holds the pointer: device 0 (users of several GPUs
    # pass torch tensors, whose device is known)
    return _Tensor(device, 0, iface["data"][0], dt, shape, tuple(strides), obj,
                   iface.get("stream") if device == "cuda" else None)


def _contiguous(shape):
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= max(int(d), 1)
    return tuple(reversed(strides))


def _from_dlpack(obj):
    import ctypes
    cap = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    raw = get(cap, b"dltensor")
    # DLManagedTensor starts with its DLTensor
    t = ffi.cast("tile_py_dltensor *", raw)
    dt = _DLPACK.get((t.dtype.code, t.dtype.bits))
    if dt is None or t.dtype.lanes != 1:
        raise TypeError("unsupported DLPack element type (code %d, %d bits)" % (t.dtype.code, t.dtype.bits))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides != ffi.NULL else _contiguous(shape)
    dev = {1: "cpu", 2: "cuda", 3: "cpu"}.get(t.device.device_type)
    if dev is None:
        raise TypeError("DLPack device type %d is not supported (CPU or CUDA)" % t.device.device_type)
    ptr = int(ffi.cast("uintptr_t", t.data)) + t.byte_offset
    return _Tensor(dev, t.device.device_id, ptr, dt, shape, strides, (obj, cap))


_TORCH_TYPES = set()


def _as_tensor(obj, name):
    if type(obj) in _TORCH_TYPES or type(obj).__module__.startswith("torch"):
        global _torch_table
        if _torch_table is None:
            _torch_table = _torch_dtypes()
            import torch
            _TORCH_TYPES.add(torch.Tensor)
            _TORCH_TENSOR[0] = torch.Tensor
            _TORCH_TYPES.add(torch.nn.Parameter)
        dt = _torch_table.get(obj.dtype)
        if dt is None:
            raise TypeError("%s: torch dtype %s is not supported" % (name, obj.dtype))
        if obj.is_cuda:
            return _Tensor("cuda", obj.get_device(), obj.data_ptr(), dt, obj.shape, obj.stride(), obj)
        return _Tensor("cpu", 0, obj.data_ptr(), dt, obj.shape, obj.stride(), obj)
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return _from_interface(obj, iface, "cuda")
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        return _from_interface(obj, iface, "cpu")
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    raise TypeError("%s: expected a tensor (PyTorch, NumPy, __cuda_array_interface__ or DLPack), "
                    "got %s" % (name, type(obj).__name__))


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):
        return int(stream.cuda_stream)
    if hasattr(stream, "ptr"):
        return int(stream.ptr)
    raise TypeError("stream: expected an int handle or a stream object, got %s" % type(stream).__name__)


# ---- kernels --------------------------------------------------------------------------------
Param = namedtuple("Param", "name is_tensor is_output is_used is_read dtype rank dims")
Param.__doc__ = ("A kernel parameter: dims holds, per dimension, the shape symbol (str) or the "
                 "fixed size (int); dtype is a tile dtype name")

TuneConfig = namedtuple("TuneConfig", "config outcome reason median_ms rel_err registers local_bytes")
TuneResult = namedtuple("TuneResult", "best best_ms defines configs from_cache timed")


def _compile_options(k, device, arch):
    co = ffi.new("tile_compile_options *")
    keep = [co]
    if k.kernel:
        keep.append(ffi.new("char[]", k.kernel.encode()))
        co.kernel = keep[-1]
    defs = ffi.new("tile_define[]", max(len(k.defines), 1))
    keep.append(defs)
    for i, (n, v) in enumerate(k.defines.items()):
        nb, vb = ffi.new("char[]", n.encode()), ffi.new("char[]", v.encode())
        keep += [nb, vb]
        defs[i].name, defs[i].value = nb, vb
    co.defines, co.ndefines = defs, len(k.defines)
    co.device = lib.TILE_DEVICE_CPU if device == "cpu" else lib.TILE_DEVICE_CUDA
    if arch and device != "cpu":
        keep.append(ffi.new("char[]", arch.encode()))
        co.arch = keep[-1]
    if k.schedule and device != "cpu":
        keep.append(ffi.new("char[]", k.schedule.encode()))
        co.schedule = keep[-1]
    co.flags = k.flags
    return co, keep


def _define_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class Kernel:
    """A kernel of a .tile file or string. Compiled on first use for the device of the
    arguments (or by `prepare`), then cached per device."""

    def __init__(self, path=None, source=None, name=None, kernel=None, defines=None, arch=None,
                 autotune=False, schedule=None, verify=False, cache=True, autoconfig=None):
        if (path is None) == (source is None):
            raise ValueError("give exactly one of path= and source=")
        self.path = os.fspath(path) if path is not None else None
        if source is not None and isinstance(source, str):
            source = source.encode()
        self.source = source
        self.name = name or (self.path or "<string>")
        self.kernel = kernel
        self.defines = {str(k): _define_text(v) for k, v in (defines or {}).items()}
        self.arch = arch
        self.schedule = schedule
        self.flags = ((lib.TILE_AUTOTUNE if autotune else 0) | (lib.TILE_VERIFY_EACH if verify else 0)
                      | (lib.TILE_AUTOCONFIG if autoconfig else 0)
                      | (lib.TILE_FIXED_CONFIG if autoconfig is False else 0) | (0 if cache else lib.TILE_NO_CACHE))
        self._handles = {}
        self._fast = None  # see _fast_plan
        self._lock = threading.Lock()
        self._params = None

    def __repr__(self):
        d = ",".join("%s=%s" % kv for kv in self.defines.items())
        return "<tile.Kernel %s%s%s>" % (self.kernel or "", " from " + self.name, " " + d if d else "")

    # -- compiling
    def _handle(self, device, index=0):
        key = (device, index)
        h = self._handles.get(key)
        if h is not None:
            return h
        with self._lock:
            h = self._handles.get(key)
            if h is None:
                ctx = _context(device, index)
                co, keep = _compile_options(self, device, self.arch)
                out = ffi.new("tile_kernel **")
                with ctx.lock:
                    if self.path is not None:
                        st = lib.tile_compile_file(ctx.ptr, self.path.encode(), co, out)
                    else:
                        st = lib.tile_compile_string(ctx.ptr, self.name.encode(), self.source,
                                                     len(self.source), co, out)
                    if st != lib.TILE_OK:
                        raise _error(ctx.ptr, st)
                h = (ctx, ffi.gc(out[0], lib.tile_kernel_release), self._param_table(out[0]))
                self._handles[key] = h
        return h

    @staticmethod
    def _param_table(k):
        params = []
        info = ffi.new("tile_param_info *")
        for i in range(lib.tile_kernel_param_count(k)):
            lib.tile_kernel_param(k, i, info)
            dims = tuple(_s(info.dim_symbol[d]) if info.dim_symbol[d] != ffi.NULL else int(info.dim_size[d])
                         for d in range(info.rank))
            params.append(Param(_s(info.name), bool(info.is_tensor), bool(info.is_output),
                                bool(info.is_used), bool(info.is_read),
                                _DTYPE_NAMES.get(info.dtype, "none"), info.rank, dims))
        return params

    @property
    def params(self):
        """The parameters (compiles for the CPU interpreter if nothing is compiled yet)."""
        if not self._handles:
            self._handle("cpu")
        return next(iter(self._handles.values()))[2]

    def config(self, device="cuda"):
        """The compile-time parameters' values of the specialization for `device`."""
        _, k, _ = self._handle(device)
        tuned = lib.tile_kernel_tuned_config(k)
        return _s(tuned) if tuned != ffi.NULL else _s(lib.tile_kernel_config(k))

    # -- arguments
    def _bind(self, args, kwargs):
        """The call's arguments as a tile_arg array in parameter order, and the device they
        live on (that of the first tensor; the CPU interpreter when there is none). The
        array is built in one cffi call from Python values (the launch overhead matters)."""
        first, first_obj = None, None
        for a in args if not kwargs else list(args) + list(kwargs.values()):
            if a is None or isinstance(a, (bool, int, float)):
                continue
            first, first_obj = _as_tensor(a, "argument"), a
            break
        device = first.device if first else "cpu"
        index = first.index if first else 0
        ctx, handle, params = self._handle(device, index)
        n = len(params)
        if len(args) > n:
            raise TypeError("%s takes %d arguments, got %d" % (self.kernel or "kernel", n, len(args)))
        bound = list(args)
        if len(bound) < n:
            bound += [None] * (n - len(bound))
        for name, v in kwargs.items():
            idx = next((i for i, p in enumerate(params) if p.name == name), None)
            if idx is None:
                raise TypeError("no parameter named %r (parameters: %s)" %
                                (name, ", ".join(p.name for p in params)))
            if idx < len(args):
                raise TypeError("parameter %r given twice" % name)
            bound[idx] = v
        init, keep = [], []
        stream = None
        for p, v in zip(params, bound):
            if p.is_tensor:
                if v is None:
                    if p.is_used:
                        raise TypeError("missing tensor argument %r" % p.name)
                    # no data: the shape is not checked
                    init.append((_ARG_TENSOR, {"tensor": (0, _DTYPE_BY_NAME.get(p.dtype, 0), p.rank)}))
                    continue
                t = first if v is first_obj else _as_tensor(v, p.name)
                if t.device != device or t.index != index:
                    raise ValueError("%s: on %s:%d, but the first tensor argument is on %s:%d" %
                                     (p.name, t.device, t.index, device, index))
                if len(t.shape) > 4:
                    raise ValueError("%s: rank %d (at most 4)" % (p.name, len(t.shape)))
                if not any(t.strides) and any(d > 1 for d in t.shape):
                    raise ValueError("%s: a broadcast tensor (all strides 0): pass a contiguous copy" % p.name)
                init.append((_ARG_TENSOR, {"tensor": (t.ptr, t.dtype, len(t.shape), t.shape, t.strides)}))
                keep.append(t.keep)
                if stream is None and t.stream is not None:
                    stream = t.stream
            else:
                if v is None:
                    if p.is_used:
                        raise TypeError("missing scalar argument %r" % p.name)
                    v = 0  # not used by this specialization (e.g. alpha without SCALED)
                if p.dtype in _FLOAT_NAMES:
                    init.append((_ARG_FLOAT, {"f": float(v)}))
                else:
                    if isinstance(v, float) and not v.is_integer():
                        raise TypeError("%s: an integer parameter, got %r" % (p.name, v))
                    init.append((_ARG_INT, {"i": int(v)}))
        owner = ffi.new("tile_py_arg[]", init or 1)  # freed when `keep` goes
        keep.append(owner)
        arr = ffi.cast("tile_arg *", owner)
        return ctx, handle, params, arr, keep, device, index, stream, first

    def _stream(self, device, index, stream, from_args, first):
        if device == "cpu":
            return ffi.NULL
        if stream is not None:
            h = _stream_handle(stream)
        elif first is not None and type(first.keep) in _TORCH_TYPES:
            h = _torch_current_stream(index)
        else:
            # __cuda_array_interface__'s stream: 1 = legacy default, 2 = per-thread default
            h = (None if from_args == 1 else from_args) if isinstance(from_args, int) else None
        return ffi.cast("void *", h or 0)

    def __call__(self, *args, stream=None, **kwargs):
        """Launches the kernel (asynchronously on the GPU: on `stream`, else torch's current
        stream for torch tensors, else the legacy default stream)."""
        fast = self._fast
        if fast is not None and not kwargs and stream is None and fast[7] <= len(args) <= fast[3]:
            if self._launch_fast(fast, args):
                return
        ctx, handle, params, arr, keep, device, index, s_args, first = self._bind(args, kwargs)
        lo = ffi.new("tile_launch_options *")
        lo.stream = self._stream(device, index, stream, s_args, first)
        with ctx.lock:
            st = lib.tile_launch(ctx.ptr, handle, arr, len(params), lo)
            if st != lib.TILE_OK:
                raise _error(ctx.ptr, st)
        if (self._fast is None and device == "cuda" and not kwargs and first is not None
                and type(first.keep) is _TORCH_TENSOR[0]):
            self._fast = self._fast_plan(ctx, handle, params, index)

    # The launch overhead of a cached kernel is what a Python user pays per call, so calls
    # with torch CUDA tensors (exactly torch.Tensor) and plain scalars, all positional, take
    # a fast path after the first: the tile_arg array is built as 64-bit words in one cffi
    # call (its layout is checked at import), without per-field assignments. Anything else
    # (another tensor type, a dtype or rank the kernel does not take, another device, kwargs,
    # an explicit stream) goes through _bind, which also produces the error messages.
    # Trailing arguments the kernel does not use (gemm's bias, R, alpha, beta without their
    # epilogues) may be left out on the fast path too, as on the slow one.
    def _fast_plan(self, ctx, handle, params, index):
        if not _FAST_LAYOUT:
            return None
        plan, fmt = [], "<"
        for p in params:
            if p.is_tensor:
                try:
                    tdt = torch_dtype(p.dtype)
                except (KeyError, TypeError):
                    return None
                plan.append((_ARG_TENSOR, tdt, p.rank, (0,) * (4 - p.rank),
                             _DTYPE_BY_NAME[p.dtype] | (p.rank << 32)))
                fmt += "11q"
            elif p.dtype in _FLOAT_NAMES:
                plan.append((_ARG_FLOAT, None, 0, None, 0))
                fmt += "qd9q"
            else:
                plan.append((_ARG_INT, None, 0, None, 0))
                fmt += "11q"
        fmt += "Q"  # tile_launch_options after the arguments: its stream
        need = max((i + 1 for i, p in enumerate(params) if p.is_used), default=0)
        return (index, ctx, handle, len(params), tuple(plan), struct.Struct(fmt), threading.local(), need)

    def _launch_fast(self, fast, args):
        index, ctx, handle, n, plan, packer, tls, _ = fast
        words = []
        tensor_type = _TORCH_TENSOR[0]
        given = len(args)
        for i, (kind, tdt, rank, pad, dtrank) in enumerate(plan):
            if i >= given:  # left out, not used by the kernel: no data, or 0
                words += (kind, 0, dtrank) + _ZEROS8 if kind == _ARG_TENSOR else (kind, 0) + _ZEROS9
                continue
            v = args[i]
            if kind == _ARG_TENSOR:
                if type(v) is not tensor_type or v.dtype is not tdt or not v.is_cuda or v.dim() != rank \
                        or v.get_device() != index:
                    return False
                words += (_ARG_TENSOR, v.data_ptr(), dtrank)
                words += v.shape
                words += pad
                words += v.stride()
                words += pad
            elif kind == _ARG_INT:
                if type(v) is not int:
                    return False
                words += (_ARG_INT, v)
                words += _ZEROS9
            else:
                if type(v) is not float and type(v) is not int:
                    return False
                words += (_ARG_FLOAT, v)
                words += _ZEROS9
        words.append(_torch_current_stream(index))
        # one buffer per thread: tile_launch reads it synchronously
        mem = tls.__dict__.get("mem")
        if mem is None:
            buf = ffi.new("int64_t[]", n * _ARG_WORDS + 1)
            mem = tls.mem = (buf, ffi.buffer(buf), ffi.cast("tile_arg *", buf),
                             ffi.cast("tile_launch_options *", buf + n * _ARG_WORDS))
        packer.pack_into(mem[1], 0, *words)
        with ctx.lock:
            st = lib.tile_launch(ctx.ptr, handle, mem[2], n, mem[3])
            if st != lib.TILE_OK:
                raise _error(ctx.ptr, st)
        return True

    launch = __call__

    def prepare(self, *args, **kwargs):
        """Compiles (and loads) the specialization these arguments select, without launching."""
        ctx, handle, params, arr, keep, *_ = self._bind(args, kwargs)
        with ctx.lock:
            st = lib.tile_kernel_prepare(ctx.ptr, handle, arr, len(params))
            if st != lib.TILE_OK:
                raise _error(ctx.ptr, st)

    def stats(self, device="cuda", index=0):
        """The last launch's specialization: grid, threads, shared memory, registers, ...;
        blocks_per_sm * multiprocessors is how many of its programs run at once (-1: CPU)."""
        _, handle, _ = self._handle(device, index)
        s = ffi.new("tile_kernel_stats *")
        lib.tile_kernel_get_stats(handle, s)
        return {"grid": tuple(s.grid), "threads": s.threads, "shared_bytes": s.shared_bytes,
                "registers": s.registers, "local_bytes": s.local_bytes, "compile_ms": s.compile_ms,
                "cache_hit": s.cache_hit, "repacked": s.repacked,
                "blocks_per_sm": s.blocks_per_sm, "multiprocessors": s.multiprocessors}

    def bench(self, *args, warmup=10, reps=50, max_ms=2000.0, flush_l2_bytes=0, stream=None, **kwargs):
        """Median milliseconds of `reps` launches (CUDA events; the interpreter's wall clock)."""
        ctx, handle, params, arr, keep, device, index, s_args, first = self._bind(args, kwargs)
        bo = ffi.new("tile_bench_options *")
        bo.stream = self._stream(device, index, stream, s_args, first)
        bo.warmup, bo.reps, bo.max_ms, bo.flush_l2_bytes = warmup, reps, max_ms, flush_l2_bytes
        res = ffi.new("tile_bench_result *")
        with ctx.lock:
            st = lib.tile_bench(ctx.ptr, handle, arr, len(params), bo, res)
            if st != lib.TILE_OK:
                raise _error(ctx.ptr, st)
        return res.median_ms

    def tune(self, *args, budget_ms=120000.0, params=None, max_configs=0, force=False, store=True,
             stream=None, **kwargs):
        """Autotunes the compile-time parameters not pinned by `defines` for these arguments
        (their outputs are overwritten), pins the winner in this kernel, and returns a
        TuneResult. A stored result for the same key is reused unless force=True."""
        ctx, handle, plist, arr, keep, device, index, s_args, first = self._bind(args, kwargs)
        if device == "cpu":
            raise TileError("UNSUPPORTED", "tune: tuning times GPU launches; pass CUDA tensors")
        co, ckeep = _compile_options(self, device, self.arch)
        to = ffi.new("tile_tune_options *")
        to.budget_ms = budget_ms
        to.max_configs = max_configs
        if params:
            pb = ffi.new("char[]", ",".join(params).encode() if not isinstance(params, str) else params.encode())
            ckeep.append(pb)
            to.params = pb
        to.flags = (lib.TILE_TUNE_FORCE if force else 0) | (0 if store else lib.TILE_TUNE_NO_STORE)
        to.stream = self._stream(device, index, stream, s_args, first)
        res = ffi.new("tile_tune_result *")
        with ctx.lock:
            if self.path is not None:
                st = lib.tile_tune_file(ctx.ptr, self.path.encode(), co, arr, len(plist), to, res)
            else:
                st = lib.tile_tune(ctx.ptr, self.name.encode(), self.source, len(self.source), co, arr,
                                   len(plist), to, res)
            if st != lib.TILE_OK:
                raise _error(ctx.ptr, st)
        try:
            defines = {_s(res.defines[i].name): _s(res.defines[i].value) for i in range(res.ndefines)}
            configs = [TuneConfig(_s(c.config), _s(lib.tile_tune_outcome_name(c.outcome)), _s(c.reason),
                                  c.median_ms, c.rel_err, c.registers, c.local_bytes)
                       for c in (res.configs[i] for i in range(res.nconfigs))]
            out = TuneResult(_s(res.best), res.best_ms, defines, configs, res.from_cache, res.timed)
        finally:
            lib.tile_tune_result_free(res)
        with self._lock:
            self.defines = dict(defines)
            self._handles = {}
            self._fast = None
        return out


def compile(path=None, *, source=None, name=None, kernel=None, defines=None, arch=None,
            autotune=False, schedule=None, verify=False, cache=True, autoconfig=None):
    """A Kernel from a .tile file (`path`) or a string (`source`, reported as `name`).
    defines: compile-time parameters {"BM": 128, "T": "bf16"}; arch: CUDA target (None = the
    GPU's); autotune: the first launch of each new shape bucket tunes the parameters not
    pinned by defines (kept in memory and on disk); autoconfig (on unless False): each new
    shape bucket runs parameters chosen from the grid without timing (smaller tiles and fewer
    warps where the default's overhang the problem or leave multiprocessors idle, then deeper
    pipelines for one-wave grids); False runs the compiled configuration at every shape;
    schedule: sm_90a schedule options;
    verify: the IR verifier after every pass; cache=False bypasses the caches.
    Nothing is compiled until the first launch, `prepare`, or `params`."""
    return Kernel(path, source, name, kernel, defines, arch, autotune, schedule, verify, cache, autoconfig)


def emit(path=None, *, source=None, name=None, what="ptx", kernel=None, defines=None,
         arch="sm_90a", device="cuda", schedule=None):
    """The compiler's output as text: what = "ast", "ir", "llvm" or "ptx"."""
    kinds = {"ast": lib.TILE_EMIT_AST, "ir": lib.TILE_EMIT_IR, "llvm": lib.TILE_EMIT_LLVM,
             "ptx": lib.TILE_EMIT_PTX}
    if what not in kinds:
        raise ValueError("what: one of %s" % ", ".join(kinds))
    if (path is None) == (source is None):
        raise ValueError("give exactly one of path= and source=")
    if path is not None:
        with open(path, "rb") as f:
            source = f.read()
        name = name or os.fspath(path)
    elif isinstance(source, str):
        source = source.encode()
    k = Kernel(source=source, name=name, kernel=kernel, defines=defines, schedule=schedule)
    ctx = _context("cpu")
    co, keep = _compile_options(k, device, arch)
    eo = ffi.new("tile_emit_options *")
    eo.what = kinds[what]
    out, n = ffi.new("char **"), ffi.new("size_t *")
    with ctx.lock:
        st = lib.tile_emit(ctx.ptr, (name or "<string>").encode(), source, len(source), co, eo, out, n)
        if st != lib.TILE_OK:
            raise _error(ctx.ptr, st)
    try:
        return ffi.unpack(out[0], n[0]).decode()
    finally:
        lib.tile_free(out[0])


def lib_path(name):
    """The path of a kernel file shipped with tile: lib_path("gemm") -> .../gemm.tile."""
    fn = name if name.endswith(".tile") else name + ".tile"
    for d in (os.path.join(_HERE, "lib"), os.path.join(_HERE, "..", "..", "..", "lib")):
        p = os.path.abspath(os.path.join(d, fn))
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("no kernel file %s among tile's lib kernels" % fn)


def version():
    return _s(lib.tile_version())


def cache_path():
    """The on-disk cache directory in use (None when it is off) and why not, if so."""
    c = _context("cpu")
    return _s(lib.tile_cache_path(c.ptr))


def cache_entries():
    """The on-disk cache's entries: a list of dicts (file, kind, bytes, valid, summary)."""
    c = _context("cpu")
    rows = []

    @ffi.callback("void(void *, const tile_cache_entry *)")
    def fn(ud, e):
        rows.append({"file": _s(e.file), "kind": _s(e.kind), "bytes": e.bytes, "mtime": e.mtime,
                     "valid": bool(e.valid), "summary": _s(e.summary)})

    with c.lock:
        st = lib.tile_cache_list(c.ptr, fn, ffi.NULL)
        if st != lib.TILE_OK:
            raise _error(c.ptr, st)
    return rows


def cache_clear():
    """Removes every entry of the on-disk cache; returns how many."""
    c = _context("cpu")
    n = ffi.new("unsigned *")
    with c.lock:
        st = lib.tile_cache_clear(c.ptr, n)
        if st != lib.TILE_OK:
            raise _error(c.ptr, st)
    return n[0]


def device_info(index=0):
    """The GPU's name, compute capability, SM count and the compile target chosen for it."""
    c = _context("cuda", index)
    d = ffi.new("tile_device_info *")
    with c.lock:
        st = lib.tile_device_query(c.ptr, lib.TILE_DEVICE_CUDA, d)
        if st != lib.TILE_OK:
            raise _error(c.ptr, st)
    return {"name": _s(d.name), "cc": (d.cc_major, d.cc_minor), "sm_count": d.sm_count,
            "smem_per_block_optin": d.smem_per_block_optin, "driver_version": d.driver_version,
            "arch": _s(d.arch), "clock_mhz": d.clock_mhz, "peak_tc_f16_tflops": d.peak_tc_f16_tflops,
            "peak_f32_tflops": d.peak_f32_tflops, "peak_mem_gbps": d.peak_mem_gbps}


def synchronize(index=0):
    c = _context("cuda", index)
    with c.lock:
        st = lib.tile_synchronize(c.ptr, lib.TILE_DEVICE_CUDA)
        if st != lib.TILE_OK:
            raise _error(c.ptr, st)
