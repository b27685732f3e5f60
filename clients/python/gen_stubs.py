#!/usr/bin/env python3
"""Generate the vocabd.v1 Python stubs from proto/ with Debian's protoc.

Usage: gen_stubs.py [--proto-dir DIR] OUT_DIR

Writes OUT_DIR/vocabd/v1/{tensor,rope,model,embedding,scoring,position,tokenizer}_pb2.py
and *_pb2_grpc.py (plus an empty __init__.py), importable as ``vocabd.v1.*``
next to the ``vocabd`` wrapper package.

Tools: ``protoc`` (Debian protobuf-compiler, 3.21: knows proto3 ``optional``)
and ``grpc_python_plugin`` (Debian protobuf-compiler-grpc). Not grpc-tools'
bundled protoc 3.5.1, which rejects proto3 ``optional`` fields. $PROTOC and
$GRPC_PYTHON_PLUGIN override the tool paths.
"""
import argparse
import os
import shutil
import subprocess
import sys

PROTOS = ("tensor", "rope", "model", "embedding", "scoring", "position", "tokenizer")
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def find_tool(env, name):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise RuntimeError(
            f"{name} not found (set ${env}); install Debian "
            + ("protobuf-compiler" if name == "protoc" else "protobuf-compiler-grpc"))
    return path


def generate(out_dir, proto_dir=DEFAULT_PROTO_DIR):
    """Runs protoc; returns the list of files written."""
    protoc = find_tool("PROTOC", "protoc")
    plugin = find_tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    sources = [os.path.join(proto_dir, "vocabd", "v1", p + ".proto") for p in PROTOS]
    for s in sources:
        if not os.path.isfile(s):
            raise RuntimeError(f"proto file {s} does not exist (proto dir {proto_dir})")
    os.makedirs(os.path.join(out_dir, "vocabd", "v1"), exist_ok=True)
    cmd = [protoc, f"--proto_path={proto_dir}", f"--python_out={out_dir}",
           f"--grpc_python_out={out_dir}", f"--plugin=protoc-gen-grpc_python={plugin}"] + sources
    subprocess.run(cmd, check=True)
    init = os.path.join(out_dir, "vocabd", "v1", "__init__.py")
    with open(init, "w") as f:
        f.write('"""Generated vocabd.v1 protobuf and gRPC stubs (gen_stubs.py)."""\n')
    written = [init]
    for p in PROTOS:
        for suffix in ("_pb2.py", "_pb2_grpc.py"):
            written.append(os.path.join(out_dir, "vocabd", "v1", p + suffix))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--proto-dir", default=DEFAULT_PROTO_DIR)
    args = ap.parse_args()
    try:
        generate(args.out_dir, args.proto_dir)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"gen_stubs.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
