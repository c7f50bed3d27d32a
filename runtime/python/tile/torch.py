"""A tile kernel as a PyTorch operator (`torch.library`), so that models calling it compile
under `torch.compile` without graph breaks.

    import tile, tile.torch
    gemm = tile.compile(tile.lib_path("gemm"), kernel="gemm")
    mm = tile.torch.custom_op(gemm, "mylib::gemm")
    c = mm(a, b)                      # returns C; works eagerly and inside torch.compile

The operator is functional: the kernel's input tensors and scalars are its arguments (in the
kernel's order, scalars as keyword-or-positional), its output tensors are allocated and
returned (one tensor, or a tuple in the kernel's order). An output the kernel also reads
(`C += ...`) is taken as an argument too, and the operator returns an updated copy. The fake
(meta) implementation allocates outputs from the kernel's shape relations: each dimension of
an output is a fixed size or a shape symbol bound by an input tensor; a symbol that no input
binds becomes an extra int argument of that name. Tensors unused by the compiled
specialization (bias without HAS_BIAS) stay optional arguments (None).
"""
import torch

import tile as _tile

_SCALAR_TYPE = {"f32": "float", "f16": "float", "bf16": "float", "f64": "float", "i32": "int",
                "i64": "int", "u32": "int", "bool": "bool"}


class _Plan:
    def __init__(self, kernel):
        self.kernel = kernel
        self.params = kernel.params
        self.args = []     # (param index, kind): kinds "tensor", "tensor?", "scalar", "inout"
        self.outputs = []  # param indices of outputs, in order
        bound = set()
        for i, p in enumerate(self.params):
            if p.is_tensor and not p.is_output:
                self.args.append((i, "tensor" if p.is_used else "tensor?"))
                bound.update(d for d in p.dims if isinstance(d, str))
            elif p.is_tensor and p.is_output:
                if not p.is_used:
                    continue  # not written by this specialization (LSE without HAS_LSE)
                self.outputs.append(i)
                if p.is_read:
                    self.args.append((i, "inout"))
                    bound.update(d for d in p.dims if isinstance(d, str))
            else:
                self.args.append((i, "scalar"))
        self.extra = []  # output shape symbols bound by no input: int arguments
        for i in self.outputs:
            for d in self.params[i].dims:
                if isinstance(d, str) and d not in bound and d not in self.extra:
                    self.extra.append(d)

    def schema(self, opname):
        parts = []
        for i, kind in self.args:
            p = self.params[i]
            if kind == "tensor":
                parts.append("Tensor %s" % p.name)
            elif kind == "tensor?":
                parts.append("Tensor? %s=None" % p.name)
            elif kind == "inout":
                parts.append("Tensor %s" % p.name)
            else:
                ty = _SCALAR_TYPE.get(p.dtype, "float")
                if p.is_used:
                    parts.append("%s %s" % (ty, p.name))
                else:  # unused by this specialization (alpha without SCALED): optional
                    parts.append("%s %s=%s" % (ty, p.name, {"float": "0.", "int": "0", "bool": "False"}[ty]))
        parts += ["SymInt %s" % s for s in self.extra]
        ret = ["Tensor"] * len(self.outputs)
        rets = ret[0] if len(ret) == 1 else "(%s)" % ", ".join(ret)
        # optional arguments must come last in a schema: keep the kernel's order otherwise
        req = [a for a in parts if "=" not in a]
        opt = [a for a in parts if "=" in a]
        return "%s(%s) -> %s" % (opname, ", ".join(req + opt), rets), [a.split()[1].split("=")[0] for a in req + opt]

    def sizes(self, values):
        """Shape symbol -> size from the input tensors (and the extra int arguments)."""
        env = {}
        for i, kind in self.args:
            p = self.params[i]
            v = values.get(p.name)
            if kind in ("tensor", "inout", "tensor?") and v is not None:
                for d, s in zip(p.dims, v.shape):
                    if isinstance(d, str):
                        env.setdefault(d, s)
        for s in self.extra:
            env[s] = values[s]
        return env

    def new_outputs(self, values, like):
        env = self.sizes(values)
        outs = []
        for i in self.outputs:
            p = self.params[i]
            if p.is_read:
                outs.append(values[p.name].clone())
                continue
            shape = [env[d] if isinstance(d, str) else d for d in p.dims]
            outs.append(torch.empty(shape, dtype=_tile.torch_dtype(p.dtype), device=like.device))
        return outs


def custom_op(kernel, name):
    """Registers `kernel` (a tile.Kernel) as the operator `name` ("namespace::op") with CPU
    and CUDA implementations and a fake one, and returns it (torch.ops.namespace.op). The
    kernel is compiled for the CPU interpreter to read its parameters."""
    if "::" not in name:
        raise ValueError("name: 'namespace::op', got %r" % name)
    ns, opname = name.split("::", 1)
    plan = _Plan(kernel)
    schema, order = plan.schema(opname)
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(schema)

    def bind(args, kwargs):
        values = dict(zip(order, args))
        values.update(kwargs)
        return values

    def first_tensor(values):
        for v in values.values():
            if isinstance(v, torch.Tensor):
                return v
        raise TypeError("%s: no tensor argument" % name)

    def impl(*args, **kwargs):
        values = bind(args, kwargs)
        outs = plan.new_outputs(values, first_tensor(values))
        call = {}
        for i, p in enumerate(plan.params):
            if i in plan.outputs:
                call[p.name] = outs[plan.outputs.index(i)]
            elif p.name in values:
                call[p.name] = values[p.name]
        kernel(**call)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def fake(*args, **kwargs):
        values = bind(args, kwargs)
        outs = plan.new_outputs(values, first_tensor(values))
        return outs[0] if len(outs) == 1 else tuple(outs)

    lib.impl(opname, impl, "CPU")
    lib.impl(opname, impl, "CUDA")
    torch.library.register_fake(name, fake, lib=lib)
    _registered.append(lib)  # a Library object unregisters its ops when collected
    return getattr(getattr(torch.ops, ns), opname)


_registered = []
