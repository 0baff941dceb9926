# Checks and converts Hugging Face GPT-2 directories (config.json + model.safetensors) for
# the hf end-to-end test, with the standard library only (the format is a little-endian
# u64 header length, a JSON header, raw little-endian data).
#   hf-check.py layout DIR PARAMS.npy L C V T   the export's names, shapes and Conv1D
#                                              transposes against the checkpoint's params
#   hf-check.py convert SRC DST F16|BF16        a copy in that dtype, names without the
#                                              "transformer." prefix, plus the lm_head and
#                                              attention-mask tensors a reader ignores
#   hf-check.py rounded LOADED.npy PARAMS.npy F16|BF16   LOADED is PARAMS in that dtype
import array
import json
import os
import struct
import sys


def npy_floats(path):
    b = open(path, "rb").read()
    wide = b[6] != 1
    size = struct.unpack("<I" if wide else "<H", b[8:12] if wide else b[8:10])[0]
    a = array.array("f")
    a.frombytes(b[(12 if wide else 10) + size:])
    return a


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def tensor(header, data, name):
    t = header[name]
    begin, end = t["data_offsets"]
    a = array.array("f")
    a.frombytes(data[begin:end])
    return t, a


def layout(d, params_path, L, C, V, T):
    cfg = json.load(open(os.path.join(d, "config.json")))
    want = {"n_layer": L, "n_embd": C, "vocab_size": V, "n_positions": T, "model_type": "gpt2"}
    bad = [k for k, v in want.items() if cfg.get(k) != v]
    header, data = read_st(os.path.join(d, "model.safetensors"))
    p = npy_floats(params_path)
    t, wte = tensor(header, data, "transformer.wte.weight")
    if t["shape"] != [V, C] or wte != p[:V * C]:
        bad.append("wte")
    qkvw = V * C + T * C + 2 * L * C  # after wte, wpe, ln1w, ln1b
    t, w = tensor(header, data, "transformer.h.0.attn.c_attn.weight")
    ours = p[qkvw:qkvw + 3 * C * C]  # [3C, C]: row o, column i
    if t["shape"] != [C, 3 * C] or any(w[i * 3 * C + o] != ours[o * C + i]
                                       for i in range(C) for o in range(3 * C)):
        bad.append("c_attn transposed")
    shapes = {"transformer.h.%d.mlp.c_fc.weight" % (L - 1): [C, 4 * C],
              "transformer.h.0.mlp.c_proj.weight": [4 * C, C],
              "transformer.h.0.attn.c_proj.weight": [C, C], "transformer.ln_f.bias": [C]}
    bad += [k for k, s in shapes.items() if header[k]["shape"] != s]
    if any(v.get("dtype", "F32") != "F32" for k, v in header.items() if k != "__metadata__"):
        bad.append("dtype")
    print("ok" if not bad else "differ: " + ", ".join(bad))


def half(x, dtype):
    if dtype == "F16":
        return struct.pack("<e", x)
    return struct.pack("<f", x)[2:]  # bfloat16: the upper half, truncated


def convert(src, dst, dtype):
    header, data = read_st(os.path.join(src, "model.safetensors"))
    out, blob = {"__metadata__": {"format": "pt"}}, bytearray()
    names = [k for k in header if k != "__metadata__"]
    extra = {"lm_head.weight": "transformer.wte.weight"}
    for name in names + list(extra):
        t, a = tensor(header, data, extra.get(name, name))
        raw = b"".join(half(x, dtype) for x in a)
        short = name[len("transformer."):] if name.startswith("transformer.") else name
        out[short] = {"dtype": dtype, "shape": t["shape"],
                      "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    out["h.0.attn.bias"] = {"dtype": "F32", "shape": [1],
                            "data_offsets": [len(blob), len(blob) + 4]}
    blob += struct.pack("<f", 1.0)
    text = json.dumps(out).encode()
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(blob))
    with open(os.path.join(dst, "config.json"), "w") as f:
        f.write(open(os.path.join(src, "config.json")).read())


def rounded(loaded, params, dtype):
    a, b = npy_floats(loaded), npy_floats(params)
    size = 2
    ok = len(a) == len(b) and all(
        x == struct.unpack("<e", half(y, dtype))[0] if dtype == "F16"
        else struct.pack("<f", x) == bytes(size) + half(y, dtype) for x, y in zip(a, b))
    print("equal" if ok else "differ")


cmd = sys.argv[1]
if cmd == "layout":
    layout(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8]))
elif cmd == "convert":
    convert(*sys.argv[2:5])
else:
    rounded(*sys.argv[2:5])
