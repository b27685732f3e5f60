#!/usr/bin/python3
"""Counts the vector loads of the packed quantized kernels' register tiles.

    /usr/bin/python3 bench/tile_loads.py [BUILD_DIR]   (default build)

Disassembles BUILD_DIR's lib/head/.../quant_kernel_avx512packed.cc.o with
objdump (binutils) and, for each type's kernel (PackedKernelT<...>), finds
its innermost loops (a backward jump with no other backward jump inside),
takes the one with the most vpdpbusd (the widest tile: 8 input rows) and
prints, per iteration, its vpdpbusd, its vector loads (a vector instruction
with a memory source operand; a {1toN} broadcast operand counts as one load,
stores and prefetches do not) and scalar (GPR) loads, and the load bound:
vpdpbusd / vector loads, the share of the int8 peak the tile can reach on a
core that issues as many vector loads per cycle as vpdpbusd (two on the Zen 5
of docs/performance.md, which head_bench's load lines measure).
"""
import re
import subprocess
import sys

OBJECT = "lib/head/CMakeFiles/vocabd_head.dir/quant_kernel_avx512packed.cc.o"
TYPE_NAMES = {
    "PackedQ8_0": "Q8_0", "PackedQ2_K": "Q2_K", "PackedQ3_K": "Q3_K", "PackedQ4_K": "Q4_K",
    "PackedQ5_K": "Q5_K", "PackedQ6_K": "Q6_K",
}
ORDER = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
         "Q6_K"]


def functions(text):
    """{demangled name: [(address, mnemonic, operands)]} of an objdump -d listing."""
    out, current = {}, None
    for line in text.split("\n"):
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            current = m.group(2)
            out[current] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and current is not None:
            out[current].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def load_kind(mnemonic, operands):
    """'vector', 'gpr', 'store' or None (AT&T syntax: the destination is last)."""
    if "(" not in operands or mnemonic.startswith("prefetch") or mnemonic.startswith("lea"):
        return None
    if not mnemonic.startswith("v"):
        return "gpr"
    last = operands.split(",")[-1]
    if "(" in last and mnemonic.startswith(("vmov", "vextract", "vpmov")):
        return "store"
    return "vector"


def widest_inner_loop(instructions):
    index = {a: i for i, (a, _, _) in enumerate(instructions)}
    back = []
    for i, (a, mnemonic, operands) in enumerate(instructions):
        m = re.match(r"([0-9a-f]+)", operands) if mnemonic.startswith("j") else None
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in index:
            back.append((index[int(m.group(1), 16)], i))
    best = None
    for j, i in back:
        if any(j2 >= j and i2 < i and (j2, i2) != (j, i) for j2, i2 in back):
            continue  # not innermost
        body = instructions[j:i + 1]
        dp = sum(1 for _, mn, _ in body if mn.startswith("vpdpbusd"))
        kinds = [load_kind(mn, ops) for _, mn, ops in body]
        loads = kinds.count("vector")
        broadcasts = sum(1 for (_, mn, ops), k in zip(body, kinds) if k == "vector" and "{1to" in ops)
        row = (dp, loads, broadcasts, kinds.count("gpr"), len(body))
        if dp > 0 and (best is None or row > best):
            best = row
    return best


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", f"{build}/{OBJECT}"],
                          check=True, capture_output=True, text=True).stdout
    rows = {}
    for name, instructions in functions(text).items():
        m = re.search(r"PackedKernelT<vocabd::\(anonymous namespace\)::(\w+)"
                      r"(<vocabd::quant::Block(\w+))?", name)
        if not m:
            continue
        type_name = m.group(3) or TYPE_NAMES.get(m.group(1), m.group(1))
        rows[type_name] = widest_inner_loop(instructions)
    print(f"{build}/{OBJECT}: the widest tile's innermost loop, per iteration")
    print("| type | vpdpbusd | vector loads | of them broadcasts | GPR loads | instructions |"
          " load bound |")
    print("|---|---|---|---|---|---|---|")
    for type_name in ORDER + sorted(set(rows) - set(ORDER)):
        if rows.get(type_name) is None:
            continue
        dp, loads, broadcasts, gpr, n = rows[type_name]
        bound = min(1.0, dp / loads) if loads else 1.0
        print(f"| {type_name} | {dp} | {loads} | {broadcasts} | {gpr} | {n} | {bound:.0%} |")


if __name__ == "__main__":
    main()
