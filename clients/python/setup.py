"""vocabd Python client: installs from the checkout with no downloads.

    /usr/bin/python3 -m pip install --no-build-isolation --no-deps --no-index clients/python

The vocabd.v1 stubs are generated at build time from ../../proto (or
$VOCABD_PROTO_DIR) with Debian's protoc and grpc_python_plugin (gen_stubs.py).
Runtime dependencies come from Debian: python3-grpcio, python3-protobuf,
python3-numpy.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


def _require_debian_python():
    """The runtime dependencies are Debian packages, importable only by
    Debian's interpreter (/usr/bin/python3). Another python3 (pyenv, conda,
    a venv without --system-site-packages) would install a client that
    cannot import grpc, after pip's own 'invalid command bdist_wheel' when it
    lacks `wheel`: say so here, before anything is built."""
    missing = []
    for module in ("grpc", "google.protobuf", "numpy"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        sys.exit(f"vocabd client: {sys.executable} cannot import {', '.join(missing)} "
                 "(Debian's python3-grpcio, python3-protobuf, python3-numpy); install with "
                 "/usr/bin/python3 -m pip install --no-build-isolation --no-deps --no-index ...")


_require_debian_python()
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
