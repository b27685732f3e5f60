"""examples/stories260k_generate.py reproduces llama2.c's greedy sample.

NumPy blocks + vocabd Embed / ApplyRope / Score, 256 steps from BOS; the text
must equal ../shared/models/stories260K/greedy_t0_n256.txt byte for byte.
"""
import os
import subprocess
import sys

from conftest import HERE, SHARED_MODELS, SOURCE_DIR


def test_example_reproduces_greedy_t0_n256(vocabd_server):
    with open(os.path.join(SHARED_MODELS, "stories260K", "greedy_t0_n256.txt"), "rb") as f:
        want = f.read()
    assert len(want) == 566
    script = os.path.join(HERE, "..", "examples", "stories260k_generate.py")
    out = subprocess.run([sys.executable, script, "--target", vocabd_server.target,
                          "--model", "stories260K"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600, check=False,
                         cwd=SOURCE_DIR)
    assert out.returncode == 0, out.stderr.decode()
    got = out.stdout
    if got != want:
        i = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]),
                 min(len(got), len(want)))
        raise AssertionError(f"first difference at byte {i} (got {len(got)} bytes, want "
                             f"{len(want)}):\n got:  {got[i:i + 80]!r}\n want: {want[i:i + 80]!r}")


def test_example_with_a_prompt_continues_it(vocabd_server):
    """A prompt that is the sample's own start, tokenized by vocabd and run
    through the model position by position (prefill), gives the same 256
    positions; a prompt with an emoji (4 byte-fallback tokens) is printed
    back whole by the incremental decoder."""
    with open(os.path.join(SHARED_MODELS, "stories260K", "greedy_t0_n256.txt"), "rb") as f:
        want = f.read()
    script = os.path.join(HERE, "..", "examples", "stories260k_generate.py")

    def run(*args):
        out = subprocess.run([sys.executable, script, "--target", vocabd_server.target] +
                             list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=600, check=False, cwd=SOURCE_DIR)
        assert out.returncode == 0, out.stderr.decode()
        return out.stdout

    assert want.startswith(b"Once upon a time, there was a little girl")
    assert run("--model", "stories260K", "--prompt",
               "Once upon a time, there was a little girl") == want
    got = run("--model", "stories260K-hf", "--prompt", "Lily saw a \U0001F600 and", "--steps", "24")
    assert got.startswith("Lily saw a \U0001F600 and".encode("utf-8")), got
    got.decode("utf-8")  # well-formed throughout
    assert got.endswith(b"\n") and len(got) > len("Lily saw a \U0001F600 and".encode("utf-8")) + 1
