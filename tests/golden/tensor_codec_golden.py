#!/usr/bin/python3
"""Golden values for tests/proto/tensor_codec_test.cc.

F16 uses NumPy's IEEE binary16 (astype, round-to-nearest-even). NumPy has no
bfloat16, so BF16 decode is the definition (bits << 16 as binary32) and BF16
encode picks the nearer of the two neighbouring bf16 values in float64, ties
to the even mantissa (what PyTorch `.to(torch.bfloat16)` does), with 2^128
standing in for the value past the largest finite bf16 (IEEE overflow rule).

All values are stored as bit patterns (ints) so the comparison is exact.
Run: /usr/bin/python3 tests/golden/tensor_codec_golden.py > tests/golden/tensor_codec.json
"""
import json
import sys

import numpy as np


def f32_bits(x):
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def bits_f32(b):
    return float(np.array([b], dtype=np.uint32).view(np.float32)[0])


def f16_decode(bits):
    v = np.array([bits], dtype=np.uint16).view(np.float16).astype(np.float32)
    return int(v.view(np.uint32)[0])


def f16_encode(f32bits):
    v = np.array([f32bits], dtype=np.uint32).view(np.float32).astype(np.float16)
    return int(v.view(np.uint16)[0])


def bf16_decode(bits):
    return int(bits) << 16


def bf16_value(bits16):
    """float64 value of a bf16 pattern; 0x7F80/0xFF80 -> +-2^128 (overflow)."""
    sign = -1.0 if bits16 & 0x8000 else 1.0
    if bits16 & 0x7FFF == 0x7F80:
        return sign * 2.0 ** 128
    return float(np.array([bits16 << 16], dtype=np.uint32).view(np.float32)[0])


def bf16_encode(f32bits):
    x = float(np.array([f32bits], dtype=np.uint32).view(np.float32)[0])
    lo = f32bits >> 16
    if lo & 0x7FFF == 0x7F80 and f32bits & 0xFFFF == 0:  # +-inf
        return lo
    hi = lo + 1  # next pattern away from zero (same sign)
    dlo = abs(x - bf16_value(lo))
    dhi = abs(bf16_value(hi) - x)
    if dlo < dhi or (dlo == dhi and lo % 2 == 0):
        return lo
    return hi


F16_DECODE_BITS = [0x0000, 0x8000, 0x0001, 0x0002, 0x03FF, 0x0400, 0x3555, 0x3BFF, 0x3C00, 0x3C01,
                   0xBC00, 0x4000, 0x4248, 0xC500, 0x5640, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00]
BF16_DECODE_BITS = [0x0000, 0x8000, 0x0001, 0x007F, 0x0080, 0x3EAB, 0x3F80, 0x3F81, 0xBF80, 0x4049,
                    0x4780, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80]

ENCODE_VALUES = [
    np.float32(0.0), np.float32(-0.0), np.float32(1.0), np.float32(-2.5), np.float32(0.1),
    np.float32(-0.1), np.float32(1.0) / np.float32(3.0), np.float32(3.14159265),
    np.float32(1.0 + 2.0 ** -11), np.float32(1.0 + 3 * 2.0 ** -11),  # f16 ties
    np.float32(1.0 + 2.0 ** -8), np.float32(1.0 + 3 * 2.0 ** -8),    # bf16 ties
    np.float32(65504.0), np.float32(65519.0), np.float32(65520.0), np.float32(1e6),
    np.float32(2.0 ** -25), np.float32(3 * 2.0 ** -25), np.float32(1e-8), np.float32(6.1e-5),
    np.float32(3.4028235e38), np.float32(1e-40), np.float32(np.inf), np.float32(-np.inf),
]


def main():
    with np.errstate(over="ignore"):
        out = {
            "f16_decode": [{"bits": b, "f32_bits": f16_decode(b)} for b in F16_DECODE_BITS],
            "bf16_decode": [{"bits": b, "f32_bits": bf16_decode(b)} for b in BF16_DECODE_BITS],
            "encode": [
                {
                    "value": repr(float(v)),
                    "f32_bits": f32_bits(v),
                    "f16_bits": f16_encode(f32_bits(v)),
                    "bf16_bits": bf16_encode(f32_bits(v)),
                }
                for v in ENCODE_VALUES
            ],
        }
    for e in out["f16_decode"] + out["bf16_decode"]:
        e["value"] = repr(bits_f32(e["f32_bits"]))
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
