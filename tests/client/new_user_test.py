"""vocabd and vocabctl as a first-time user meets them: the built binaries, run
from outside the checkout.

Run by ctest (vocabctl_new_user_test) with VOCABD_BINARY, VOCABCTL_BINARY,
VOCABD_SOURCE_DIR and PYTHONPATH set (tests/CMakeLists.txt); the process
helpers come from clients/python/tests/conftest.py.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import grpc
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("VOCABD_SOURCE_DIR", os.path.normpath(os.path.join(HERE, "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "clients", "python", "tests"))
from conftest import BINARY, SHARED_MODELS, VocabdProcess, start_vocabd, tmp_dir  # noqa: E402,F401

VOCABCTL = os.environ.get("VOCABCTL_BINARY", os.path.join(os.path.dirname(BINARY), "..",
                                                          "client", "vocabctl"))
STORIES_BIN = os.path.join(SOURCE_DIR, "models", "stories260K", "stories260K.bin")


def run(args, cwd=None, timeout=120):
    """Runs a binary; returns (exit code, stdout, stderr) as text."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def ctl(server, *args, cwd=None):
    return run([VOCABCTL, "--target", server.target] + list(args), cwd=cwd)


@pytest.fixture(scope="module")
def default_server():
    """vocabd started OUTSIDE the checkout with no --model: the built-in
    default path (models/stories260K/stories260K.bin) must resolve beside
    the binary."""
    import tempfile
    cwd = tempfile.mkdtemp(prefix="vocabd-cwd-")
    s = VocabdProcess([], cwd=cwd)
    yield s
    s.stop()
    shutil.rmtree(cwd, ignore_errors=True)


# -- relative model paths ----------------------------------------------------

def test_default_model_resolves_outside_the_repo(default_server):
    log = default_server.log_text()
    assert f"from {os.path.realpath(STORIES_BIN)}" in log, log
    code, out, err = ctl(default_server, "--json", "models", "stories260K")
    assert code == 0, err
    paths = [f["path"] for f in json.loads(out)["source_files"]]
    assert paths and all(os.path.isabs(p) for p in paths), paths


def test_missing_relative_model_names_the_tried_paths(tmp_dir):
    code, out, err = run([BINARY, "--listen", "127.0.0.1:0", "--model", "x=models/nope.bin"],
                         cwd=tmp_dir)
    assert code == 1
    text = out + err
    assert "model 'x' path models/nope.bin does not exist" in text, text
    assert f"tried {tmp_dir}/models/nope.bin, " in text, text
    # ... and beside the binary (build/server/vocabd -> the checkout's models/).
    assert os.path.join(os.path.realpath(SOURCE_DIR), "models", "nope.bin") in text, text


def test_bench_verify_works_outside_the_repo(default_server, tmp_dir):
    code, out, err = ctl(default_server, "bench", "score", "-n", "20", "--verify",
                         "--verify-every", "1", "--no-progress", cwd=tmp_dir)
    assert code == 0, out + err
    assert re.search(r"verify: \d+ checked, 0 mismatches", out), out
    # A relative --verify-checkpoint resolves beside vocabctl too.
    code, out, err = ctl(default_server, "bench", "score", "-n", "10", "--verify",
                         "--verify-checkpoint", "models/stories260K/stories260K.bin",
                         "--no-progress", cwd=tmp_dir)
    assert code == 0, out + err
    code, out, err = ctl(default_server, "bench", "score", "-n", "10", "--verify",
                         "--verify-checkpoint", "models/missing.bin", "--no-progress", cwd=tmp_dir)
    assert code == 1 and "tried " in err and "models/missing.bin" in err, err


# -- --server-pid ------------------------------------------------------------

def test_server_pid_with_two_pids_points_to_the_pid_file(default_server, tmp_dir):
    code, out, err = ctl(default_server, "bench", "score", "-n", "5", "--server-pid",
                         f"{default_server.proc.pid} 1", "--no-progress")
    assert code == 2
    assert "several pids" in err and "--server-pid-file" in err, err
    assert not re.search(r"\d{30}", err), err  # no 300-digit CLI11 range
    pid_file = os.path.join(tmp_dir, "vocabd.pid")
    with open(pid_file, "w") as f:
        f.write(f"{default_server.proc.pid}\n")
    code, out, err = ctl(default_server, "bench", "score", "-n", "5", "--server-pid-file",
                         pid_file, "--no-progress")
    assert code == 0, err
    assert f"server pid {default_server.proc.pid} VmRSS" in out, out


# -- embed beyond the trained length -------------------------------------------

def test_embed_beyond_trained_length_hint_names_a_real_flag(default_server):
    code, out, err = ctl(default_server, "embed", "--ids", "1", "--positions", "sinusoidal",
                         "--offset", "600")
    assert code == 1
    assert "--allow-beyond-trained-length" in err, err
    code, out, err = ctl(default_server, "embed", "--ids", "1", "--positions", "sinusoidal",
                         "--offset", "600", "--allow-beyond-trained-length")
    assert code == 0, err
    code, out, err = ctl(default_server, "embed", "--ids", "1", "--positions", "sinusoidal",
                         "--offset", "600", "--allow-beyond")
    assert code == 0, err


# -- non-finite hidden rows: the hint names a flag / argument that exists -----

def test_non_finite_hint_names_a_real_flag_and_argument(default_server, tmp_dir):
    import numpy as np
    row = np.linspace(-1, 1, 64, dtype=np.float32)
    row[5] = np.nan
    path = os.path.join(tmp_dir, "nan.f32")
    row.tofile(path)
    for cmd in (["score", "--hidden-file", path, "--no-pieces"], ["logits", "--hidden-file", path]):
        code, out, err = ctl(default_server, *cmd)
        assert code == 1, (cmd, out)
        assert "hidden[0, 5] = nan is not finite (set allow_non_finite" in err, err
        assert "hint: vocabctl: pass --allow-non-finite" in err, err
        code, out, err = ctl(default_server, *cmd, "--allow-non-finite")
        assert code == 0, (cmd, err)
    from vocabd import VocabdClient, VocabdError
    with VocabdClient(default_server.target, timeout=10) as c:
        for call in (lambda **kw: c.score(row[None, :], **kw),
                     lambda **kw: c.compute_logits(row[None, :], **kw)):
            with pytest.raises(VocabdError) as e:
                call()
            assert "set allow_non_finite" in e.value.message, str(e.value)
            call(allow_non_finite=True)  # the argument the message names exists
        assert np.isnan(c.score(row[None, :], allow_non_finite=True).rows[0].logsumexp)
        q = np.ones((1, 8, 2, 8), np.float32)
        q[0, 1, 0, 3] = np.inf
        with pytest.raises(VocabdError) as e:
            c.apply_rope(q, np.ones((1, 4, 2, 8), np.float32))
        assert "set allow_non_finite" in e.value.message, str(e.value)
        out_q, _ = c.apply_rope(q, np.ones((1, 4, 2, 8), np.float32), allow_non_finite=True)
        assert out_q.shape == q.shape


# -- models table truths -------------------------------------------------------

def test_models_table_shows_served_head_types_and_hints_only_failures(tmp_dir):
    root = os.path.join(tmp_dir, "repo")
    os.makedirs(os.path.join(root, "stories"))
    shutil.copy(STORIES_BIN, os.path.join(root, "stories", "stories.bin"))
    os.makedirs(os.path.join(root, "km"))
    shutil.copy(os.path.join(SHARED_MODELS, "quant", "synth-v1024-h512-Q4_K_M.gguf"),
                os.path.join(root, "km"))
    os.makedirs(os.path.join(root, "later"))
    shutil.copy(STORIES_BIN, os.path.join(root, "later", "later.bin"))
    os.makedirs(os.path.join(root, "empty"))
    s = VocabdProcess(["--model", f"s8={STORIES_BIN}", "--weights-dtype", "s8=q8_0",
                       "--model-repository", root, "--load-model", "stories",
                       "--load-model", "km"])
    try:
        code, out, err = ctl(s, "models")
        assert code == 0, err
        lines = out.splitlines()
        header = lines[0].split()
        dtype = header.index("DTYPE")
        rows = {l.split()[0]: l.split() for l in lines[1:] if l and not l.startswith(" ")}
        assert set(rows) == {"s8*", "stories", "km", "later"}, out
        assert rows["s8*"][dtype] == "q8_0", out      # quantized at load by --weights-dtype
        assert rows["km"][dtype] == "q6_K", out       # Q4_K_M: token_embd q4_K, output q6_K
        assert rows["stories"][dtype] == "F32", out
        assert rows["later"][1] == "AVAILABLE", out
        assert not any(l.startswith(" ") for l in lines[1:]), out  # no hint under AVAILABLE
        code, out, err = ctl(s, "--json", "models")
        assert code == 0, err
        models = {m["name"]: m for m in json.loads(out)["models"]}
        assert "empty" not in models, out
        assert models["s8"]["requested_weights_type"] == "q8_0", models["s8"]
        assert "requested_dtype" not in models["s8"], models["s8"]
        assert models["stories"]["requested_weights_type"] == "auto", models["stories"]
        assert "requested_dtype" not in models["stories"], models["stories"]
        code, out, err = ctl(s, "--json", "models", "s8")
        assert code == 0, err
        assert "requested_dtype" not in json.loads(out), out
    finally:
        s.stop()


# -- --temperature, --json errors, --help --------------------------------------

def test_temperature_zero_is_refused(default_server):
    for cmd in (["score", "--from-ids", "1,403", "--targets", "403,407"],
                ["logits", "--from-ids", "1,403"]):
        code, out, err = ctl(default_server, *cmd, "--temperature", "0.5")
        assert code == 0, (cmd, err)
        code, out, err = ctl(default_server, *cmd, "--temperature", "0")
        assert code == 2, (cmd, out, err)
        assert "--temperature: must be > 0, got 0" in err, err
        assert not re.search(r"\d{30}", err), err  # not CLI11's whole double range


def test_json_errors_are_a_json_object_on_stdout(default_server):
    code, out, err = ctl(default_server, "--json", "embed", "--ids", "1,9999")
    assert code == 1
    doc = json.loads(out)
    assert doc["error"]["code"] == "INVALID_ARGUMENT"
    assert "9999" in doc["error"]["message"]
    assert "error: INVALID_ARGUMENT" in err  # stderr keeps the human line
    code, out, err = ctl(default_server, "--json", "embed", "--ids", "1", "--dtype", "f64")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "USAGE"


def test_vocabd_help_mentions_gguf():
    code, out, err = run([BINARY, "--help"])
    assert code == 0
    assert ".gguf" in out


def test_vocabd_version_names_the_build():
    code, out, err = run([BINARY, "--version"])
    assert code == 0, err
    assert re.fullmatch(r"vocabd version=\d+\.\d+\.\d+ git_sha=\S+ compiler=\S+ onednn=\S+ "
                        r"build_type=\S+\n", out), out


# -- model repository ----------------------------------------------------------

@pytest.fixture(scope="module")
def repository():
    import tempfile
    root = tempfile.mkdtemp(prefix="vocabd-repo-")
    os.makedirs(os.path.join(root, "stories"))
    shutil.copy(STORIES_BIN, os.path.join(root, "stories", "stories.bin"))
    os.makedirs(os.path.join(root, "tiny"))
    shutil.copy(os.path.join(SHARED_MODELS, "llama-2-tiny-random", "llama-2-tiny-random.gguf"),
                os.path.join(root, "tiny"))
    os.makedirs(os.path.join(root, "broken"))
    with open(os.path.join(root, "broken", "broken.bin"), "wb") as f:
        f.write(b"\x00" * 12)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_models_lists_repository_folders_and_failure_reasons(repository):
    s = VocabdProcess(["--model-repository", repository, "--load-model", "stories"])
    try:
        code, out, err = ctl(s, "models")
        assert code == 0, err
        rows = {l.split()[0]: l.split()[1] for l in out.splitlines()[1:] if l and not l.startswith(" ")}
        assert rows == {"stories*": "READY", "tiny": "AVAILABLE", "broken": "AVAILABLE"}, out
        assert "(no models)" not in out
        # A folder holding one .gguf of another name loads.
        code, out, err = ctl(s, "load", "tiny")
        assert code == 0, err
        assert "vocab_size:" in out and "32000" in out
        code, out, err = ctl(s, "load", "broken")
        assert code == 1
        code, out, err = ctl(s, "models")
        broken = [l for l in out.splitlines() if l.startswith("broken")]
        assert broken and broken[0].split()[1] == "FAILED", out
        assert "DTYPE_UNSPECIFIED" not in out, out
        assert re.search(r"^\s+broken: loading model 'broken' from .*broken", out, re.M), out
        log = s.log_text()
        assert re.search(r"\[(error|warning)\].*loading model 'broken' from .* failed", log), log
        code, out, err = ctl(s, "--json", "models")
        states = {m["name"]: m["state"] for m in json.loads(out)["models"]}
        assert states == {"stories": "READY", "tiny": "READY", "broken": "FAILED"}, states
    finally:
        s.stop()


# -- TLS ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def certs():
    import tempfile
    d = tempfile.mkdtemp(prefix="vocabd-certs-")
    # The recipe of docs/operating.md ("TLS, mTLS and tokens"); the server
    # certificate names DNS:vocabd only (no IP SAN).
    subprocess.run(["sh", os.path.join(SOURCE_DIR, "deploy", "make-certs.sh"), d, "DNS:vocabd"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_tls_hints_and_server_name(certs):
    with open(f"{certs}/tokens", "w") as f:
        f.write("s3cret\n")
    s = VocabdProcess(["--model", f"s={STORIES_BIN}", "--tls-cert", f"{certs}/server.pem",
                       "--tls-key", f"{certs}/server.key", "--tls-client-ca", f"{certs}/ca.pem",
                       "--auth-token-file", f"{certs}/tokens"])
    try:
        # Plaintext client against the TLS server: a hint to use --tls.
        code, out, err = ctl(s, "--timeout", "5000", "health")
        assert code == 1
        assert "hint: the server may require TLS: add --tls" in err, err
        # 127.0.0.1 is not in the certificate: --tls-server-name fixes it (the
        # Kubernetes exec probe does the same).
        tls = ["--ca", f"{certs}/ca.pem", "--cert", f"{certs}/client.pem", "--key",
               f"{certs}/client.key"]
        code, out, err = ctl(s, "--timeout", "5000", *tls, "health")
        assert code == 1, out
        assert "not in peer certificate" in err, err
        assert "hint: the server certificate does not name the target host: pass " \
               "--tls-server-name" in err, err
        code, out, err = ctl(s, "--timeout", "5000", *tls, "--tls-server-name", "vocabd", "health")
        assert code == 0, err
        # A --tls-server-name the certificate lacks: the hint names it.
        code, out, err = ctl(s, "--timeout", "5000", *tls, "--tls-server-name", "other", "health")
        assert code == 1, out
        assert "hint: the server certificate does not name 'other' (--tls-server-name)" in err, err
        # No client certificate against this mTLS server: the server closes the
        # handshake; the hint is the missing --cert, not plaintext or --ca.
        code, out, err = ctl(s, "--timeout", "5000", "--ca", f"{certs}/ca.pem",
                             "--tls-server-name", "vocabd", "health")
        assert code == 1, out
        assert "hint: the server closed the TLS handshake: it may require a client " \
               "certificate (mutual TLS: pass --cert FILE --key FILE)" in err, err
        assert "plaintext" not in err, err
        # A server certificate of another CA.
        code, out, err = ctl(s, "--timeout", "5000", "--ca", f"{certs}/client.pem",
                             "--cert", f"{certs}/client.pem", "--key", f"{certs}/client.key",
                             "--tls-server-name", "vocabd", "health")
        assert code == 1, out
        assert "hint: the server certificate is not signed by the --ca CA" in err, err
        # The Python client: same server name override, and the same hint.
        from vocabd import Tls, VocabdClient, VocabdError
        cfg = Tls(ca=f"{certs}/ca.pem", cert=f"{certs}/client.pem", key=f"{certs}/client.key",
                  server_name="vocabd")
        with VocabdClient(s.target, tls=cfg, token="s3cret", timeout=10) as c:
            assert c.embed([1, 2]).shape == (2, 64)
        with VocabdClient(s.target, tls=cfg, token="wrong", timeout=10) as c:
            with pytest.raises(VocabdError) as e:
                c.embed([1, 2])
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED, str(e.value)
        cfg.server_name = None
        with VocabdClient(s.target, tls=cfg, timeout=5) as c:
            with pytest.raises(VocabdError) as e:
                c.models()
        assert e.value.hint and "server_name" in e.value.hint, str(e.value)
        cfg.server_name = "other"
        with VocabdClient(s.target, tls=cfg, timeout=5) as c:
            with pytest.raises(VocabdError) as e:
                c.models()
        assert e.value.hint and "does not name 'other'" in e.value.hint, str(e.value)
        with VocabdClient(s.target, tls=Tls(ca=f"{certs}/ca.pem", server_name="vocabd"),
                          timeout=5) as c:
            with pytest.raises(VocabdError) as e:
                c.models()
        assert e.value.hint and "Tls(cert=..., key=...)" in e.value.hint, str(e.value)
        with VocabdClient(s.target, timeout=5) as c:
            with pytest.raises(VocabdError) as e:
                c.models()
        # The hint names arguments VocabdClient has: tls=, and Tls's fields.
        assert e.value.hint and "tls=True" in e.value.hint, str(e.value)
        assert "tls=Tls(ca=" in e.value.hint, str(e.value)
    finally:
        s.stop()
