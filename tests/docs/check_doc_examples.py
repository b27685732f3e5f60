#!/usr/bin/python3
"""Runs the documentation's examples against a live vocabd and compares their output.

Usage:
  check_doc_examples.py --build BUILD_DIR [--vocabd PATH] [--vocabctl PATH]
                        [--source SOURCE_DIR] [--print] [FILE.md ...]
  (env: VOCABD_BINARY, VOCABCTL_BINARY, VOCABD_PYTHON_DIR)

Without FILE arguments it checks README.md, docs/*.md and client/README.md of the
source tree. It starts the built vocabd on free loopback ports (gRPC and HTTP/JSON,
port 0, read back from its log) with the bundled models, as `deploy/dev.sh run` does:
  --model stories260K=models/stories260K/stories260K.bin
  --model stories260K-hf=models/stories260K-hf

The convention (also in docs/development.md, "Documentation examples"):
- Only fenced blocks whose info string is `console` are checked.
- A line starting with `$ ` is a command. It continues on the next line while a line
  ends with `\\`, and through the closing line of a here-document (`<<'EOF'` .. `EOF`).
  Every other line up to the next command or the end of the block is the command's
  expected output (stdout and stderr together; a missing final newline is ignored).
- The commands of one block run in order in one bash, in the source root, with the
  build's client/ and server/ directories first on PATH and VOCABD_TARGET set to the
  server. `127.0.0.1:50051` (gRPC) and `127.0.0.1:8080` (HTTP/JSON), in commands and in
  expected output, stand for the server's real addresses; a word starting with `build/`
  in a command is the build tree.
- Elision, only where an output varies or is too long to show: a line `...` matches any
  number of lines (none included); `[...]` inside a line matches any text within that
  line. Everything else must match exactly.
- Examples must not change the server's state (no unload, no load that succeeds).

Exit status 0 when every example matches, 1 otherwise (each mismatch is printed with
the expected and the actual output). --print prints what each command prints now.
Standard library only (Debian /usr/bin/python3).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GRPC_DOC = "127.0.0.1:50051"
HTTP_DOC = "127.0.0.1:8080"
SEPARATOR = "\x1e\x1dVOCABD-DOC-EXAMPLE-END\x1e"
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


class Example:
    def __init__(self, path, line, command, expected):
        self.path, self.line, self.command, self.expected = path, line, command, expected


def parse_blocks(path):
    """Yields lists of Example, one list per ```console block of `path`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(```+)\s*console\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks = fence.group(1), fence.group(2)
        i += 1
        block, current = [], None
        while i < len(lines) and lines[i].strip() != ticks:
            text = lines[i][len(indent):] if lines[i].startswith(indent) else lines[i]
            if text.startswith("$ "):
                start = i + 1
                command = [text[2:]]
                # Continuations: trailing backslash, or a here-document body.
                while command[-1].endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command.append(lines[i][len(indent):])
                heredoc = HEREDOC.search(command[-1]) or HEREDOC.search(command[0])
                if heredoc:
                    word = heredoc.group(2)
                    while i + 1 < len(lines):
                        i += 1
                        command.append(lines[i][len(indent):])
                        if command[-1] == word:
                            break
                    else:
                        raise SystemExit(f"{path}:{start}: here-document {word} never ends")
                current = Example(path, start, "\n".join(command), [])
                block.append(current)
            elif current is None:
                raise SystemExit(f"{path}:{i + 1}: console block output before any `$ ` command")
            else:
                current.expected.append(text)
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{path}: unterminated ```console block")
        i += 1
        for example in block:  # blank lines at the end of a block are not output
            while example.expected and example.expected[-1] == "":
                example.expected.pop()
        if block:
            yield block


def line_pattern(expected):
    parts = expected.split("[...]")
    return re.compile("".join(p + ("(.*)" if k < len(parts) - 1 else "")
                              for k, p in enumerate(map(re.escape, parts))) + r"\Z", re.S)


def matches(expected, actual):
    """Expected lines (with `...` and `[...]` elisions) against actual lines."""
    memo = {}

    def m(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i] == "...":
            result = any(m(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = (j < len(actual) and line_pattern(expected[i]).match(actual[j]) is not None
                      and m(i + 1, j + 1))
        memo[(i, j)] = result
        return result

    return m(0, 0)


def start_server(vocabd, source, workdir):
    log_path = os.path.join(workdir, "vocabd.log")
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [vocabd, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
         "--model", "stories260K=models/stories260K/stories260K.bin",
         "--model", "stories260K-hf=models/stories260K-hf"],
        cwd=source, stdout=log, stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if not k.startswith("VOCABD_")})
    grpc_port = http_port = None
    deadline = time.time() + 60
    while time.time() < deadline and grpc_port is None:
        if proc.poll() is not None:
            raise SystemExit("vocabd exited early:\n" + open(log_path).read())
        text = open(log_path).read()
        h = re.search(r"HTTP/JSON on http://[^ ]* \(port (\d+)\)", text)
        g = re.search(r"vocabd listening on port (\d+)", text)
        if h:
            http_port = int(h.group(1))
        if g:
            grpc_port = int(g.group(1))
        time.sleep(0.05)
    if grpc_port is None or http_port is None:
        proc.kill()
        raise SystemExit("vocabd did not report its ports:\n" + open(log_path).read())
    return proc, f"127.0.0.1:{grpc_port}", f"127.0.0.1:{http_port}"


def run_block(block, env, source, build, grpc, http):
    def to_real(text):
        return text.replace(GRPC_DOC, grpc).replace(HTTP_DOC, http)

    script = []
    for example in block:
        command = re.sub(r"(?<![\w./-])build/", build.rstrip("/") + "/", to_real(example.command))
        script.append("{\n" + command + "\n} 2>&1\nprintf '" + SEPARATOR + "'\n")
    done = subprocess.run(["bash", "-c", "".join(script)], cwd=source, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    outputs = done.stdout.decode("utf-8", "replace").split(SEPARATOR)
    results = []
    for k, example in enumerate(block):
        actual = outputs[k] if k < len(outputs) else "<no output: the block's shell ended early>"
        if actual.endswith("\n"):
            actual = actual[:-1]
        results.append(actual.split("\n") if actual else [])
    back = lambda lines: [l.replace(grpc, GRPC_DOC).replace(http, HTTP_DOC) for l in lines]
    return [back(r) for r in results]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(here)))
    parser.add_argument("--build", required=True, help="the build tree (CMAKE_BINARY_DIR)")
    parser.add_argument("--vocabd", default=os.environ.get("VOCABD_BINARY"))
    parser.add_argument("--vocabctl", default=os.environ.get("VOCABCTL_BINARY"))
    parser.add_argument("--print", action="store_true", help="print every command's output")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    build = os.path.abspath(args.build)
    vocabd = os.path.abspath(args.vocabd or os.path.join(build, "server", "vocabd"))
    vocabctl = os.path.abspath(args.vocabctl or os.path.join(build, "client", "vocabctl"))
    files = args.files or (
        [os.path.join(source, "README.md")]
        + sorted(os.path.join(source, "docs", f) for f in os.listdir(os.path.join(source, "docs"))
                 if f.endswith(".md"))
        + [os.path.join(source, "client", "README.md")])
    blocks = [b for f in files for b in parse_blocks(f)]
    if not blocks:
        raise SystemExit("no ```console examples found in " + ", ".join(files))
    for tool in (vocabd, vocabctl):
        if not os.access(tool, os.X_OK):
            raise SystemExit(f"not built: {tool}")
    if any(re.search(r"\bcurl\b", e.command) for b in blocks for e in b) and not shutil.which("curl"):
        raise SystemExit("the examples call curl, which is not installed (Debian package curl)")

    workdir = tempfile.mkdtemp(prefix="vocabd-doc-examples-")
    proc, grpc, http = start_server(vocabd, source, workdir)
    failures = checked = 0
    try:
        bindir = os.path.join(workdir, "bin")  # vocabctl/vocabd first on PATH
        os.mkdir(bindir)
        os.symlink(vocabctl, os.path.join(bindir, "vocabctl"))
        os.symlink(vocabd, os.path.join(bindir, "vocabd"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOCABD_")}
        env.update(PATH=bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
                   VOCABD_TARGET=grpc, PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8",
                   COLUMNS="80")
        env.pop("PYTHONPATH", None)
        for block in blocks:
            for example, actual in zip(block, run_block(block, env, source, build, grpc, http)):
                checked += 1
                where = f"{os.path.relpath(example.path, source)}:{example.line}"
                if args.print:
                    print(f"== {where}\n$ {example.command}\n" + "\n".join(actual))
                    continue
                if not matches(example.expected, actual):
                    failures += 1
                    print(f"FAIL {where}\n$ {example.command}\n--- expected\n"
                          + "\n".join(example.expected) + "\n--- actual\n" + "\n".join(actual)
                          + "\n---", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.print:
        return 0
    print(f"{checked} examples in {len(blocks)} blocks of {len(files)} files: "
          f"{checked - failures} match, {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
