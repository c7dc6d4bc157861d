"""A bundle's kernel as a torch custom op (torch.library), so that it runs
inside torch.compile(fullgraph=True) (an opaque op of the graph, which
mutates its output buffers) and inside a CUDA graph capture (it launches on
the current stream, the capturing one).

    gemm = bundle.kernel("gemm_hopper", "f16")
    op = tunefarm.register_torch_op(gemm)          # torch.ops.tunefarm.gemm_hopper_f16
    op([m, n, k], a, b, c, w)                      # dims in gemm.dims order, buffers in gemm.buffers order

The schema marks the kernel's "out" and "inout" buffers as written. A call
is the dispatcher's and a Kernel.launch (each shape bound once). The op
shares the Kernel, which is for one thread at a time: a thread of its own
launching the kernel wants a Kernel (and an op name) of its own. torch is
imported only here, when this is called.
"""


def register_torch_op(kernel, name=None, namespace="tunefarm"):
    """Registers `kernel` (a tunefarm.Kernel) as `torch.ops.<namespace>.<name>`
    (default name "<op>_<dtype>") and returns it. Raises TunefarmError when
    the name is taken or a buffer name cannot be a schema argument."""
    import torch
    from . import TunefarmError

    name = name or "%s_%s" % (kernel.op, kernel.dtype)
    if hasattr(getattr(torch.ops, namespace), name):
        raise TunefarmError("register_torch_op: %s::%s is registered already (give another name)" % (namespace, name))
    params, alias = ["int[] dims"], 0
    for buf, direction in zip(kernel.buffers, kernel.dirs):
        if not buf.isidentifier() or buf == "dims":
            raise TunefarmError("register_torch_op: buffer %r cannot name a schema argument" % buf)
        if direction == "in":
            params.append("Tensor %s" % buf)
        else:
            params.append("Tensor(%s!) %s" % (chr(ord("a") + alias), buf))
            alias += 1
    lib = torch.library.Library(namespace, "FRAGMENT")
    lib.define("%s(%s) -> ()" % (name, ", ".join(params)))

    def launch(dims, *buffers):  # the schema's int[] and tensors: as Kernel.launch, without its checks
        kernel._launch_for(tuple(dims), None).call(*buffers)

    def fake(dims, *buffers):  # torch.compile traces the op's effect: none beyond its written buffers
        return None

    lib.impl(name, launch, "CUDA")
    register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
    register_fake("%s::%s" % (namespace, name), lib=lib)(fake)
    op = getattr(getattr(torch.ops, namespace), name)
    _libraries.append(lib)  # the registration lives as long as the process
    return op


_libraries = []
