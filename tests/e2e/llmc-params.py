# Compares a parameter dump (params.npy of parity --dump) with an llm.c GPT-2 model file,
# for the llmc end-to-end test: the user's rows of wte and every other tensor must be
# the same bytes, the padded rows zero.
#   llmc-params.py PARAMS.npy FILE RESERVED   prints "equal" or "differ"
#   llmc-params.py --header FILE              prints maxT V L NH C Vp, then the rest's sum
#   llmc-params.py --bf16 LOADED.npy PARAMS.npy   LOADED is PARAMS rounded to bfloat16
#                                                  (nearest even), as export --dtype bf16
import struct
import sys


def npy_data(path):
    b = open(path, "rb").read()
    wide = b[6] != 1  # format version 1 has a 2-byte header length, later ones 4
    size = struct.unpack("<I" if wide else "<H", b[8:12] if wide else b[8:10])[0]
    return b[(12 if wide else 10) + size:]


def bf16_equal(loaded, params):
    a, b = npy_data(loaded), npy_data(params)
    if len(a) != len(b):
        return False
    for i in range(0, len(a), 4):
        x, y = struct.unpack("<I", a[i:i + 4])[0], struct.unpack("<I", b[i:i + 4])[0]
        if x != ((y + 0x7FFF + ((y >> 16) & 1)) >> 16) << 16:
            return False
    return True


def main():
    if sys.argv[1] == "--bf16":
        print("equal" if bf16_equal(sys.argv[2], sys.argv[3]) else "differ")
        return
    if sys.argv[1] == "--header":
        h = struct.unpack("<256i", open(sys.argv[2], "rb").read(1024))
        print(*h[:8], sum(abs(x) for x in h[8:]))
        return
    params, path, reserved = npy_data(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    f = open(path, "rb").read()
    h = struct.unpack("<256i", f[:1024])
    v, c, vp = h[3], h[6], h[7]
    body = f[1024:]
    user, pad, rest = body[:v * c * 4], body[v * c * 4:vp * c * 4], body[vp * c * 4:]
    first = reserved * c * 4
    same = (pad == bytes(len(pad)) and params[first:first + len(user)] == user
            and params[first + len(user):] == rest)
    print("equal" if same else "differ")


main()
