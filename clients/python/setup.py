"""vocabd Python client: installs from the checkout with no downloads.

    pip install --no-build-isolation --no-deps clients/python

The vocabd.v1 stubs are generated at build time from ../../proto (or
$VOCABD_PROTO_DIR) with Debian's protoc and grpc_python_plugin (gen_stubs.py).
Runtime dependencies come from Debian: python3-grpcio, python3-protobuf,
python3-numpy.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    """build_py that also writes vocabd/v1/*_pb2*.py into build_lib."""

    def run(self):
        super().run()
        proto_dir = os.environ.get("VOCABD_PROTO_DIR", gen_stubs.DEFAULT_PROTO_DIR)
        gen_stubs.generate(self.build_lib, proto_dir)


setup(
    name="vocabd",
    version="0.1.0",
    description="Python client for vocabd (embeddings, LM-head scoring, RoPE over gRPC)",
    packages=["vocabd"],
    python_requires=">=3.9",
    # Debian packages provide these (python3-grpcio, python3-protobuf, python3-numpy);
    # listed for pip's metadata, never fetched with --no-deps.
    install_requires=["grpcio", "protobuf", "numpy"],
    cmdclass={"build_py": BuildPyWithStubs},
)
