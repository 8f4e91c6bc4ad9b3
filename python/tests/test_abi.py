"""The ctypes structs mirror include/tensorscope.h: every struct's size and
every field's offset as the C compiler lays them out."""
import ctypes
import os
import subprocess

from tensorscope import _capi

STRUCTS = {
    "ts_array": _capi.Array, "ts_optimizer": _capi.Optimizer, "ts_stats": _capi.Stats,
    "ts_range": _capi.Range, "ts_summary": _capi.Summary, "ts_watch_result": _capi.WatchResult,
    "ts_outfeed_config": _capi.OutfeedConfig, "ts_outfeed_record": _capi.OutfeedRecord,
    "ts_outfeed_counts": _capi.OutfeedCounts, "ts_memory_usage": _capi.MemoryUsage,
    "ts_model_memory": _capi.ModelMemory, "ts_loader_config": _capi.LoaderConfig,
}


def test_structs_match_the_header(tmp_path, source_dir):
    with open(os.path.join(source_dir, "include", "tensorscope.h")) as f:
        if "ts_onnx_input;" in f.read():
            STRUCTS["ts_onnx_input"] = _capi.OnnxInput
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "tensorscope.h"',
             "int main(void) {"]
    for cname, cls in STRUCTS.items():
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
    for cname, cls in STRUCTS.items():
        assert int(seen[cname]) == ctypes.sizeof(cls), cname
        for field, _ in cls._fields_:
            assert int(seen[f"{cname}.{field}"]) == getattr(cls, field).offset, f"{cname}.{field}"
