"""A graph built by a test's function over inputs of its arrays' dtypes and
shapes, run once for inference: its outputs as a list (the tests of int64
and bool graph tensors)."""
import tensorscope as ts


def run(build, *arrays):
    g = ts.Graph()
    ins = [g.input(f"x{i}", a.dtype, list(a.shape)) for i, a in enumerate(arrays)]
    outs = build(g, *ins)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    m = ts.inference_model(g, ts.Options(), outputs=list(outs))
    m.compile()
    got = m(*arrays)
    return got if isinstance(got, (list, tuple)) else [got]
