"""The ctypes structs mirror include/tensorscope.h: every struct's size and
every field's offset as the C compiler lays them out."""
import ctypes
import os
import re
import subprocess

from tensorscope import _capi
from tensorscope.graph import OPS, _parse

STRUCTS = {
    "ts_array": _capi.Array, "ts_optimizer": _capi.Optimizer, "ts_stats": _capi.Stats,
    "ts_range": _capi.Range, "ts_summary": _capi.Summary, "ts_watch_result": _capi.WatchResult,
    "ts_outfeed_config": _capi.OutfeedConfig, "ts_outfeed_record": _capi.OutfeedRecord,
    "ts_outfeed_counts": _capi.OutfeedCounts, "ts_memory_usage": _capi.MemoryUsage,
    "ts_model_memory": _capi.ModelMemory, "ts_loader_config": _capi.LoaderConfig,
    "ts_compare_result": _capi.CompareResult, "ts_onnx_input": _capi.OnnxInput,
    "ts_conv2d_params": _capi.Conv2dParams, "ts_pool2d_params": _capi.Pool2dParams,
    "ts_conv_transpose2d_params": _capi.ConvTranspose2dParams,
    "ts_conv3d_params": _capi.Conv3dParams,
    "ts_lr_schedule": _capi.LrSchedule, "ts_memwatch_stats": _capi.MemwatchStats,
    "ts_diff_result": _capi.DiffResult, "ts_memory_buffer": _capi.MemoryBuffer, "ts_spike": _capi.Spike,
}


def test_structs_match_the_header(tmp_path, source_dir):
    with open(os.path.join(source_dir, "include", "tensorscope.h")) as f:
        header = f.read()
    structs = {c: cls for c, cls in STRUCTS.items() if f"}} {c};" in header}
    assert "ts_array" in structs and "ts_summary" in structs
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "tensorscope.h"',
             "int main(void) {"]
    for cname, cls in structs.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _ in cls._fields_:
            lines.append(f'printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    lines.append("return 0; }")
    c = tmp_path / "abi.c"
    c.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    subprocess.run(["cc", "-std=c11", "-I", os.path.join(source_dir, "include"), str(c), "-o",
                    str(exe)], check=True)
    seen = dict(line.rsplit(" ", 1) for line in
                subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines())
    for cname, cls in structs.items():
        assert int(seen[cname]) == ctypes.sizeof(cls), cname
        for field, _ in cls._fields_:
            assert int(seen[f"{cname}.{field}"]) == getattr(cls, field).offset, f"{cname}.{field}"


# The C parameters each kind of a builder row stands for (tensorscope/graph.py).
KIND_C_TYPES = {"T": ["ts_tensor *"], "T?": ["ts_tensor *"], "TS": ["ts_tensor *const *", "int"],
                "I": ["int"], "I32": ["int32_t"], "L": ["int64_t"], "F": ["float"],
                "S": ["const char *"], "D": ["ts_dtype"], "SHAPE": ["int", "const int64_t *"],
                "NI": ["int", "const int *"], "IP": ["const int *"], "A": ["const ts_array *"],
                "CONV2D": ["const ts_conv2d_params *"], "POOL2D": ["const ts_pool2d_params *"],
                "CONVT2D": ["const ts_conv_transpose2d_params *"],
                "CONV3D": ["const ts_conv3d_params *"]}


def test_builder_rows_match_the_header(source_dir):
    with open(os.path.join(source_dir, "include", "tensorscope.h")) as f:
        header = f.read()
    prototypes = {m.group(1): m.group(2) for m in re.finditer(
        r"TS_API ts_tensor \*(\w+)\(([^)]*)\);", header)}
    for method, (cname, spec) in OPS.items():
        if cname not in prototypes:  # not in this library: a call raises UnsupportedError
            assert not hasattr(_capi.lib, cname), cname
            continue
        params = [" ".join(p.split()) for p in prototypes[cname].split(",")]
        c_types = [re.sub(r"\s*\*\s*", " *", re.sub(r"\s*\b\w+$", "", p)).strip()
                   for p in params]
        expected = ["ts_graph *"] + [t for _, kind, _ in _parse(spec) for t in KIND_C_TYPES[kind]]
        assert c_types == expected, f"{method}: {cname}({prototypes[cname]})"
