#!/usr/bin/python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun
after changing a target's input format): valid inputs of every kind the
product reads, and a few near misses. NumPy writes the .npy seeds."""
import gzip
import io
import os
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def idx(dims, payload):
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_pair(images, labels, gz_here):
    if not gz_here:  # the files themselves, gzip framing included
        images, labels = gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)
    return bytes([1 if gz_here else 0]) + struct.pack("<H", len(images)) + images + labels


n, r, c = 3, 4, 4
images = idx([n, r, c], bytes(range(n * r * c)))
labels = idx([n], bytes([1, 7, 9]))
put("fuzz_idx_gz", "valid_gz_in_harness", idx_pair(images, labels, True))
put("fuzz_idx_gz", "valid_gzip_files", idx_pair(images, labels, False))
put("fuzz_idx_gz", "plain_files", bytes([0]) + struct.pack("<H", len(images)) + images + labels)
put("fuzz_idx_gz", "truncated_images", idx_pair(images[:-5], labels, True))
put("fuzz_idx_gz", "count_mismatch", idx_pair(images, idx([2], bytes([1, 2])), True))
put("fuzz_idx_gz", "huge_claim", idx_pair(idx([60000, 28, 28], b"\0" * 16), labels, True))

for name, a in {
    "f32_2x3": np.arange(6, dtype="<f4").reshape(2, 3) * 0.5,
    "f64_4": np.arange(4, dtype="<f8") / 3,
    "i32_3x2": np.arange(6, dtype="<i4").reshape(3, 2) - 2,
    "i64_2x2": np.arange(4, dtype="<i8"),
    "u8_5x1": np.arange(5, dtype="u1").reshape(5, 1),
    "scalar": np.array(3.25, dtype="<f4"),
    "empty_0x3": np.zeros((0, 3), dtype="<f4"),
    "nan_inf": np.array([np.nan, np.inf, -np.inf, 1.0], dtype="<f4"),
    "big_endian": np.arange(3, dtype=">f4"),
    "fortran": np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)),
}.items():
    b = io.BytesIO()
    np.save(b, a)
    put("fuzz_npy_load", name + ".npy", b.getvalue())
b = io.BytesIO()
np.lib.format.write_array(b, np.arange(6, dtype="<f4").reshape(2, 3), version=(2, 0))
put("fuzz_npy_load", "v2_f32_2x3.npy", b.getvalue())

for name, args in {
    "typical": ["--epochs", "3", "--lr", "0.01", "--quiet", "--data", "data/mnist"],
    "anchors": ["--anchor", "fc1/MatMul:0:every_n:2", "--anchor=Gradient___*.weight:all", "--anchor", "Relu:0"],
    "output_mode": ["--output-mode", "every_n:4", "--dump-limit", "500M"],
    "inline_values": ["--epochs=2", "--lr=1e-3", "--data=d"],
    "bad": ["--epochs", "4294967297", "--anchor", "x:every_n:4294967297", "--nope"],
    "rest": ["--quiet", "--", "echo", "hi"],
    "help": ["--help"],
    "trace_steps": ["--trace-steps", "2:4", "--trace-steps", "5:", "--trace-steps", "5:2"],
}.items():
    put("fuzz_cli_args", name, b"\0".join(a.encode() for a in args))

for name, vals in {
    "op": ["op", "0", "text", "1"],
    "output_dot": ["output", "1", "dot", "0"],
    "junk": ["sometimes", "yes", "svg", "2"],
    "empty": [""],
}.items():
    put("fuzz_env", name, b"\0".join(v.encode() for v in vals))



def descriptor(dtype, shape):  # fuzz_py_api's ts_array: dtype, ndim, 8 int16 dims
    dims = list(shape) + [0] * (8 - len(shape))
    return bytes([dtype, len(shape) & 0xff]) + b"".join(struct.pack("<h", d) for d in dims)


# fuzz_py_api: a byte of numbers (anchor mode, watch what, periods), then
# output mode, numeric check, schedule, size, anchor short name and pattern,
# watch pattern, outfeed name, filter and key, pipeline split, tensor
# lookup, scope, then two array descriptors
for name, (nums, strs, arrays) in {
    "basic": (0x43, ["all", "output", "cosine", "1.5G", "o", "out", "fc*", "q", "fc*", "fc.weight", "fc",
                     "fc.weight", "blk"], descriptor(0, [4, 3]) + descriptor(0, [4, 3])),
    "every_n": (0x82, ["every_n", "op", "step", "512MB", "h", "fc/MatMul:0", "*", "q2", "[a-z]*", "fc.bias", "fc",
                       "x", "s"], descriptor(1, [2, 3]) + descriptor(2, [2, 3])),
    "glob_anchor": (0x19, ["SUM", "off", "constant", "4096", "", "*", "fc.bias", "", "", "", "", "", ""],
                    descriptor(3, [-1, 3]) + descriptor(0, [0])),
    "bad": (0xff, ["bogus", "1", "x", "12Q", "a/b", "[", "?", "", "\\", "", "  ", "nope", ""], descriptor(6, [0x7fff])),
    "empty": (0, [], b""),
}.items():
    put("fuzz_py_api", name, bytes([nums]) + b"\0".join(v.encode() for v in strs) + b"\0" + arrays)

# fuzz_onnx: models PyTorch exported (tests/reference/make_onnx_fixtures.py
# writes them), one per kind of graph the importer folds or builds
FIXTURES = os.path.join(os.path.dirname(ROOT), "..", "tests", "reference", "onnx")
for name in ("mlp_op13", "mlp_dynamic_op13", "lenet_op13", "resnet18_train_op15", "gpt2_op17"):
    with open(os.path.join(FIXTURES, name + ".onnx"), "rb") as f:
        put("fuzz_onnx", name + ".onnx", f.read())


# fuzz_onnx_external: a model x [2,4] @ w [4,2] -> y whose weight is
# external data, written by hand in protobuf's wire format (the `onnx`
# package is not needed): 4 bytes of model length, the model, the data file.
def pb_varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(field, v):
    return pb_varint(field << 3) + pb_varint(v)


def pb_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def onnx_value_info(name, dims):
    shape = b"".join(pb_bytes(1, pb_int(1, d)) for d in dims)  # TensorShapeProto.dim
    tensor = pb_int(1, 1) + pb_bytes(2, shape)  # elem_type float, shape
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, tensor))


def onnx_external_model(location, offset=None):
    entries = [("location", location)] + ([("offset", offset)] if offset is not None else [])
    w = pb_int(1, 4) + pb_int(1, 2) + pb_int(2, 1) + pb_bytes(8, "w")
    w += b"".join(pb_bytes(13, pb_bytes(1, k) + pb_bytes(2, v)) for k, v in entries) + pb_int(14, 1)
    node = pb_bytes(1, "x") + pb_bytes(1, "w") + pb_bytes(2, "y") + pb_bytes(3, "mm") + pb_bytes(4, "MatMul")
    graph = pb_bytes(1, node) + pb_bytes(2, "g") + pb_bytes(5, w)
    graph += pb_bytes(11, onnx_value_info("x", [2, 4])) + pb_bytes(12, onnx_value_info("y", [2, 2]))
    return pb_int(1, 8) + pb_bytes(8, pb_int(2, 17)) + pb_bytes(7, graph)


weights = np.arange(8, dtype="<f4").tobytes()
for name, loc, offset, data in [
    ("beside", "weights.bin", None, weights),
    ("offset", "weights.bin", "8", b"\0" * 8 + weights),
    ("short", "weights.bin", None, weights[:12]),
    ("subfolder", "sub/w.bin", None, b""),
    ("link_passwd", "passwd.bin", None, b""),
    ("link_zero", "zero.bin", None, b""),
    ("link_folder", "up/weights.bin", None, weights),
    ("fifo", "fifo.bin", None, b""),
    ("folder", "sub", None, b""),
    ("dotdot", "sub/../weights.bin", None, weights),
]:
    model = onnx_external_model(loc, offset)
    put("fuzz_onnx_external", name, struct.pack("<I", len(model)) + model + data)

# fuzz_npz: archives as numpy.savez / savez_compressed write them (members
# stored, deflated; bzip2 as other zip writers may), with fixed timestamps;
# and the hostile kinds: bombs whose members inflate past the harness's
# limit, a member larger than its .npy header says, a directory entry, a
# member that is not .npy, a truncated archive.
import bz2  # noqa: E402  (the standard library's, for zipfile)
import zipfile  # noqa: E402


def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npz(members, method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return b.getvalue()


assert bz2  # zipfile needs it for ZIP_BZIP2
data_members = [("x.npy", npy(np.arange(12, dtype="<f4").reshape(4, 3) / 4)),
                ("labels.npy", npy(np.array([0, 1, 2, 1], dtype="<i8")))]
put("fuzz_npz", "savez_dataset.npz", npz(data_members))
put("fuzz_npz", "savez_compressed_dataset.npz", npz(data_members, zipfile.ZIP_DEFLATED))
put("fuzz_npz", "bzip2_dataset.npz", npz(data_members, zipfile.ZIP_BZIP2))
put("fuzz_npz", "narrow_types.npz", npz([
    ("h.npy", npy(np.array([1.5, -2], dtype="<f2"))), ("b.npy", npy(np.array([-1, 7], dtype="i1"))),
    ("s.npy", npy(np.array([-300], dtype="<i2"))), ("u.npy", npy(np.array([4000000000], dtype="<u4"))),
    ("t.npy", npy(np.array([True, False]))), ("e.npy", npy(np.zeros((0, 3), dtype="<f4")))], zipfile.ZIP_DEFLATED))
bomb = npy(np.zeros((32, 1024, 1024), dtype="u1"))  # 32 MiB of zeros
put("fuzz_npz", "bomb_bzip2.npz", npz([("x.npy", bomb), ("y.npy", bomb), ("z.npy", bomb)], zipfile.ZIP_BZIP2))
put("fuzz_npz", "bomb_deflate.npz", npz([("x.npy", npy(np.zeros((8, 1024, 1024), dtype="u1")))], zipfile.ZIP_DEFLATED))
small = npy(np.arange(4, dtype="<f4"))
put("fuzz_npz", "member_longer_than_header.npz", npz([("x.npy", small + b"\0" * 16)], zipfile.ZIP_DEFLATED))
put("fuzz_npz", "member_shorter_than_header.npz", npz([("x.npy", small[:-4])]))
put("fuzz_npz", "not_npy_member.npz", npz([("x.txt", b"hello")]))
with_dir = io.BytesIO()
with zipfile.ZipFile(with_dir, "w") as z:
    z.writestr(zipfile.ZipInfo("d/", date_time=(1980, 1, 1, 0, 0, 0)), b"")
    z.writestr(zipfile.ZipInfo("d/x.npy", date_time=(1980, 1, 1, 0, 0, 0)), small)
put("fuzz_npz", "directory_entry.npz", with_dir.getvalue())
put("fuzz_npz", "truncated.npz", npz(data_members)[:-30])
