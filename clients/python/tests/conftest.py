"""pytest fixtures: start the built vocabd binary on 127.0.0.1:0 and connect.

Environment (set by the ctest entry `python_client_test`, tests/CMakeLists.txt):
  VOCABD_BINARY      path of the built vocabd (default: ../../../build/server/vocabd)
  VOCABD_SOURCE_DIR  the checkout (models/, ../shared/models beside it)
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("VOCABD_SOURCE_DIR", os.path.normpath(os.path.join(HERE, "..", "..", "..")))
BINARY = os.environ.get("VOCABD_BINARY", os.path.join(SOURCE_DIR, "build", "server", "vocabd"))
SHARED_MODELS = os.path.normpath(os.path.join(SOURCE_DIR, "..", "shared", "models"))


class VocabdProcess:
    """A vocabd started with `args`; .target is "127.0.0.1:PORT"."""

    def __init__(self, args, cwd=None):
        self.log = tempfile.NamedTemporaryFile(prefix="vocabd-py-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([BINARY, "--listen", "127.0.0.1:0"] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.port is None:
            m = re.search(r"listening on port (\d+)", self.log_text())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
        if self.port is None:
            self.stop()
            raise RuntimeError(f"vocabd did not start; log:\n{self.log_text()}")
        self.target = f"127.0.0.1:{self.port}"

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


@pytest.fixture(scope="session")
def vocabd_server():
    if not os.path.exists(BINARY):
        pytest.fail(f"vocabd binary {BINARY} does not exist (set VOCABD_BINARY)")
    server = VocabdProcess([
        "--model", f"stories260K={SOURCE_DIR}/models/stories260K/stories260K.bin",
        "--model", f"stories260K-hf={SOURCE_DIR}/models/stories260K-hf",
    ])
    yield server
    server.stop()


@pytest.fixture()
def client(vocabd_server):
    from vocabd import VocabdClient
    with VocabdClient(vocabd_server.target, timeout=30) as c:
        yield c


@pytest.fixture(scope="session")
def start_vocabd():
    """Factory: start another vocabd with extra flags; stopped at session end."""
    started = []

    def start(args, cwd=None):
        s = VocabdProcess(args, cwd=cwd)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture()
def tmp_dir():
    d = tempfile.mkdtemp(prefix="vocabd-py-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
