"""FLOPs of one forward of an ONNX graph, counted from its convolutions and matrix products after
ONNX shape inference: Conv 2 * out_numel * (Cin/groups) * kh * kw, Gemm/MatMul 2 * M * N * K.
Element-wise ops, pooling and padding are left out (they are memory-bound and a few percent of
the total), so GFLOP/s figures computed from it slightly understate the work."""
import numpy as np
import onnx
from onnx import shape_inference


def _shapes(model):
    m = shape_inference.infer_shapes(model)
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = dims
    for init in m.graph.initializer:
        shapes[init.name] = list(init.dims)
    return m, shapes


def count_flops(path):
    m, shapes = _shapes(onnx.load(path))
    total = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            w = shapes[n.input[1]]  # [Cout, Cin/groups, kh, kw]
            out = shapes[n.output[0]]
            total += 2 * int(np.prod(out)) * w[1] * w[2] * w[3]
        elif n.op_type in ("Gemm", "MatMul"):
            a, b = shapes[n.input[0]], shapes[n.input[1]]
            trans_b = any(at.name == "transB" and at.i == 1 for at in n.attribute)
            k = a[-1]
            nn = b[-2] if trans_b else b[-1]
            total += 2 * int(np.prod(a[:-1])) * k * nn
    return total
