#!/usr/bin/env python3
"""A fleet of three vocabd replicas under faults (docs/operating.md, "A fleet of
replicas"; deploy/k8s/README.md).

Three replicas run as separate hosts: each in its own network namespace with
its own address (10.x.y.z over a veth pair, made and removed here with
iproute2 `ip netns` / `ip link`), or, where namespaces cannot be made (not
root, no `ip`), on distinct 127.0.0.1 ports; the first line printed says
which. Every replica gets the flags of deploy/k8s/base/configmap.yaml that
matter here (VOCABD_DRAIN_TIMEOUT_MS, VOCABD_MAX_CONCURRENT_REQUESTS,
VOCABD_MAX_TOKENS_PER_REQUEST), so the drain proved is the one the manifests
configure.

Two paths carry load at the same time, each from vocabctl bench (score) and
the Python client (embed + score) with their default service config (the
retry policy of client/vocabd_client.h kDefaultServiceConfig and
clients/python/vocabd/client.py DEFAULT_SERVICE_CONFIG):
  client-side  target "ipv4:A,B,C" with lb_policy round_robin
  proxy        nginx `grpc_pass` (an upstream of the three replicas; the
               configuration is the one documented in deploy/k8s/README.md,
               written out by nginx_config() below)
while the test
  1. kills replica 0 with SIGKILL,
  2. drains replica 1 with SIGTERM (it must exit 0 within the drain timeout),
  3. restarts both.
Every call is counted in the phase in which it completed (vocabctl bench
--phases-from-stdin; the Python loaders by the same phase marks).

Targets (each a failure when missed):
  - zero failed calls on either path in every phase (the RPCs used, Embed
    and Score, are safe to retry; the default policy re-sends UNAVAILABLE
    and server-sent CANCELLED), so in particular none while a replica
    drains;
  - the drained replica exits 0 before its drain timeout;
  - within 10 s of the restart both restarted replicas serve calls of both
    paths again, and each path's completed calls per 0.5 s window are back to
    >= 90 % of its baseline rate.
p50 / p99 / max latency of each phase and path are printed (and written as
JSON with --report FILE), and so are nginx's own answers other than
200 + grpc-status 0 per phase (from its access log): what a caller without
a retry policy would have seen through the proxy.

Exit status: 0 passed, 1 a target missed, 77 skipped (nginx not installed;
deploy/dev.sh deps test installs it). Wall time ~15 s; bounded at 60 s.

Usage (ctest fleet_test passes these, tests/CMakeLists.txt):
  /usr/bin/python3 tests/deploy/fleet_test.py --vocabd BUILD/server/vocabd \
      --vocabctl BUILD/client/vocabctl --source . [--mode auto|netns|loopback]
      [--report FILE]
with the Python client on PYTHONPATH (BUILD/clients/python/...).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
REPLICAS = 3
WALL_LIMIT_S = 60.0
# Phase lengths (seconds). "warm-up" holds the clients' first connections
# and calls (judged for errors, not used as the baseline rate).
WARMUP_S = 1.0
BASELINE_S = 3.0
KILL_S = 3.0
AFTER_DRAIN_S = 1.5
RECOVER_WAIT_S = 10.0   # the target: back within this long after the restart
RESTART_MIN_S = 4.0     # observed at least this long after the restart
# Offered load per path (open loop: latency counts queueing, no coordinated
# omission). Small Score calls keep two shared cores far from saturation.
BENCH_RATE = 150        # vocabctl bench calls/s per path
PY_THREADS = 2          # Python client threads per path
PY_RATE = 20            # calls/s per Python thread
CALL_TIMEOUT_S = 5.0


def log(msg):
    print(msg, flush=True)


def run(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


# --------------------------------------------------------------------------
# Hosts: network namespaces (or loopback ports).

class Hosts:
    """REPLICAS addresses. netns mode: namespace vocabd-fleet-<pid>-<k>, veth
    vfl<pid>h<k> (here) <-> vfl<pid>n<k> (there), 10.A.B.4k+1/30 here and
    10.A.B.4k+2/30 there (default route back here); every replica listens on
    port 50051 of its own address. loopback mode:
    127.0.0.1 with distinct ports. nginx connects to the replicas from its own
    address (proxy_source: 10.A.B.250 here, 127.0.0.2 in loopback mode), so a
    replica's request log tells the proxy's calls from the direct clients'."""

    def __init__(self, mode):
        self.mode = mode
        self.pid = os.getpid()
        self.namespaces = []
        self.links = []
        self.addresses = []
        self.ports = []
        self.proxy_source = "127.0.0.2"

    @staticmethod
    def netns_unavailable():
        if shutil.which("ip") is None:
            return "iproute2 `ip` not found"
        if os.geteuid() != 0:
            return "not root (ip netns add needs CAP_SYS_ADMIN)"
        return None

    @staticmethod
    def sweep_stale():
        """Removes what a run that was killed left (its pid is gone): the
        processes in its namespaces, then the namespaces (and their veths)."""
        try:
            names = run("ip", "netns", "list", check=False).stdout.split()
        except OSError:
            return
        for name in names:
            m = re.fullmatch(r"vocabd-fleet-(\d+)-\d+", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                for pid in run("ip", "netns", "pids", name, check=False).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
                run("ip", "netns", "del", name, check=False)

    def _free_subnet(self):
        used = run("ip", "-4", "route", "show", check=False).stdout
        base = self.pid % (150 * 256)
        for i in range(150 * 256):
            v = (base + i) % (150 * 256)
            a, b = 100 + v // 256, v % 256
            if f"10.{a}.{b}." not in used:
                return a, b
        raise RuntimeError("no free 10.x.y.0/24 for the fleet")

    def setup(self):
        if self.mode == "loopback":
            for _ in range(REPLICAS):
                self.addresses.append("127.0.0.1")
                self.ports.append(free_port())
            return
        self.sweep_stale()
        a, b = self._free_subnet()
        for k in range(REPLICAS):
            ns = f"vocabd-fleet-{self.pid}-{k}"
            here, there = f"vfl{self.pid}h{k}", f"vfl{self.pid}n{k}"
            host_ip, ns_ip = f"10.{a}.{b}.{4 * k + 1}", f"10.{a}.{b}.{4 * k + 2}"
            run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            run("ip", "link", "add", here, "type", "veth", "peer", "name", there, "netns", ns)
            self.links.append(here)
            run("ip", "addr", "add", f"{host_ip}/30", "dev", here)
            run("ip", "link", "set", here, "up")
            run("ip", "-n", ns, "addr", "add", f"{ns_ip}/30", "dev", there)
            run("ip", "-n", ns, "link", "set", there, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "route", "add", "default", "via", host_ip)
            run("ip", "netns", "exec", ns, "true")  # what starting a replica needs
            self.addresses.append(ns_ip)
            self.ports.append(50051)
        self.proxy_source = f"10.{a}.{b}.250"
        run("ip", "addr", "add", f"{self.proxy_source}/32", "dev", self.links[0])

    def prefix(self, k):
        """Command prefix that runs a process on host k."""
        return ["ip", "netns", "exec", self.namespaces[k]] if self.mode == "netns" else []

    def teardown(self):
        for link in self.links:
            run("ip", "link", "del", link, check=False)
        for ns in self.namespaces:
            run("ip", "netns", "del", ns, check=False)
        self.links, self.namespaces = [], []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------
# Replicas.

def configmap_flags(source):
    """The vocabd flags of deploy/k8s/base/configmap.yaml this test uses."""
    import yaml
    with open(os.path.join(source, "deploy", "k8s", "base", "configmap.yaml")) as f:
        data = yaml.safe_load(f)["data"]
    return {"drain_timeout_ms": int(data["VOCABD_DRAIN_TIMEOUT_MS"]),
            "max_concurrent_requests": int(data["VOCABD_MAX_CONCURRENT_REQUESTS"]),
            "max_tokens_per_request": int(data["VOCABD_MAX_TOKENS_PER_REQUEST"])}


def grpc_health(target, timeout=0.5):
    """grpc.health.v1.Health/Check("") -> True when SERVING (status 1)."""
    import grpc
    with grpc.insecure_channel(target) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        try:
            return check(b"", timeout=timeout) == b"\x08\x01"
        except grpc.RpcError:
            return False


class Replica:
    def __init__(self, k, hosts, vocabd, flags, model, logdir):
        self.k = k
        self.hosts = hosts
        self.address = hosts.addresses[k]
        self.target = f"{self.address}:{hosts.ports[k]}"
        self.argv = hosts.prefix(k) + [
            vocabd, "--listen", self.target,
            "--model", f"stories260K={model}",
            "--drain-timeout-ms", str(flags["drain_timeout_ms"]),
            "--max-concurrent-requests", str(flags["max_concurrent_requests"]),
            "--max-tokens-per-request", str(flags["max_tokens_per_request"]),
            "--compute-threads", "1", "--intra-op-threads", "1",
            # One JSON line per call, with the caller's address (peer).
            "--log-level", "debug", "--log-format", "json"]
        self.logdir = logdir
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        self.log_path = os.path.join(self.logdir, f"replica{self.k}-{self.starts}.log")
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.started_at = time.monotonic()

    def wait_serving(self, deadline):
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.k} exited {self.proc.returncode}:\n{self.log()}")
            if grpc_health(self.target):
                return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError(f"replica {self.k} not SERVING in time:\n{self.log()}")

    def calls_by_source(self):
        """{caller address: Score/Embed calls answered OK} of the running process."""
        counts = {}
        try:
            with open(self.log_path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return counts
        for line in lines:
            if '"rpc"' not in line:
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written
            if e.get("status") == "OK" and e.get("rpc", "").endswith(("/Score", "/Embed")):
                m = re.match(r"ipv4:([\d.]+):\d+$", e.get("peer", ""))
                if m:
                    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        return counts

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------
# The proxy.

def nginx_config(listen, upstreams, workdir, source):
    """nginx as an L7 gRPC proxy in front of the replicas (deploy/k8s/README.md
    shows the same server and upstream blocks; grpc_bind is the test's, so the
    replicas' logs tell its calls apart)."""
    servers = "\n".join(f"    server {u} max_fails=1 fail_timeout=1s;" for u in upstreams)
    return f"""daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log notice;
events {{ worker_connections 1024; }}
http {{
  client_body_temp_path {workdir}/body;
  proxy_temp_path {workdir}/proxy;
  fastcgi_temp_path {workdir}/fastcgi;
  uwsgi_temp_path {workdir}/uwsgi;
  scgi_temp_path {workdir}/scgi;
  log_format fleet '$msec $upstream_addr $status "$upstream_trailer_grpc_status$upstream_http_grpc_status" $request_time $uri';
  access_log {workdir}/access.log fleet;

  upstream vocabd {{
    # A replica that refused a connection or reset a call is skipped for
    # fail_timeout, then tried again: a restarted replica is back within 1 s.
{servers}
    keepalive 32;
  }}
  server {{
    listen {listen} http2;
    grpc_connect_timeout 1s;
    grpc_read_timeout 60s;
    grpc_send_timeout 60s;
    grpc_bind {source};
    # Every vocabd.v1 RPC but LoadModel/UnloadModel has no effect beyond its
    # answer (the client retry policy's list): resend it to the next replica
    # when one refuses, resets or closes (drain, crash) before answering.
    location / {{
      grpc_pass grpc://vocabd;
      grpc_next_upstream error timeout non_idempotent;
      grpc_next_upstream_tries 3;
      grpc_next_upstream_timeout 10s;
    }}
    # LoadModel / UnloadModel change one replica: never resent once sent.
    location ~ ^/vocabd\\.v1\\.ModelService/(LoadModel|UnloadModel)$ {{
      grpc_pass grpc://vocabd;
      grpc_next_upstream error timeout;
    }}
  }}
}}
"""


class Nginx:
    def __init__(self, nginx, upstreams, workdir, source):
        self.workdir = os.path.join(workdir, "nginx")
        os.makedirs(self.workdir)
        self.port = free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.conf = os.path.join(self.workdir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(nginx_config(self.target, upstreams, self.workdir, source))
        self.argv = [nginx, "-p", self.workdir, "-c", self.conf, "-e",
                     os.path.join(self.workdir, "error.log")]
        self.proc = None

    def start(self, deadline):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().decode(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not listen in time")

    def access_log(self):
        """[(unix time, upstream_addr, http status, grpc-status, uri)]; the
        grpc-status of the trailers, or of the headers of a trailers-only
        answer (how gRPC servers send an error status)."""
        rows = []
        try:
            with open(os.path.join(self.workdir, "access.log")) as f:
                for line in f:
                    m = re.match(r'(\S+) (.*) (\d+) "(\S*)" (\S+) (\S+)$', line.strip())
                    if m:
                        # nginx logs an unset variable as "-".
                        rows.append((float(m.group(1)), m.group(2), int(m.group(3)),
                                     m.group(4).replace("-", ""), m.group(6)))
        except OSError:
            pass
        return rows

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --------------------------------------------------------------------------
# Load: vocabctl bench and the Python client, per phase.

class Phases:
    """The phase every loader counts a completed call in (by completion)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.names = []
        self.starts = []   # monotonic
        self.walls = []    # time.time(), for nginx's access log

    def mark(self, name):
        with self.lock:
            self.names.append(name)
            self.starts.append(time.monotonic())
            self.walls.append(time.time())

    def at_wall(self, t):
        """The phase running at wall-clock time t (None before the first)."""
        with self.lock:
            name = None
            for n, w in zip(self.names, self.walls):
                if w <= t:
                    name = n
            return name

    def current(self):
        with self.lock:
            return self.names[-1]


class BenchLoad:
    """vocabctl bench score, open loop, phases from stdin, JSON at the end."""

    def __init__(self, vocabctl, name, target, round_robin):
        self.name = name
        argv = [vocabctl, "--target", target, "--timeout", str(int(CALL_TIMEOUT_S * 1000)), "--json"]
        if round_robin:
            argv += ["--lb-policy", "round_robin"]
        argv += ["bench", "score", "--rows", "4", "--top-k", "4", "--rate", str(BENCH_RATE),
                 "--concurrency", "64", "--duration", "300s", "--window", "500ms",
                 "--phases-from-stdin", "--no-progress", "--allow-errors",
                 "--allow-private-targets"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.result = None

    def mark(self, phase):
        self.proc.stdin.write(phase + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout):
        out, err = self.proc.communicate(timeout=timeout)  # closes stdin: ends the run
        try:
            doc = json.loads(out)
        except ValueError:
            raise RuntimeError(f"{self.name}: vocabctl bench exited {self.proc.returncode}: "
                               f"{out[-2000:]}{err[-2000:]}")
        if "levels" not in doc:
            raise RuntimeError(f"{self.name}: vocabctl bench failed: {out[-2000:]}")
        self.result = doc["levels"][0]
        return self.result

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class PythonLoad:
    """The Python client (vocabd.VocabdClient, default service config): each
    thread alternates embed and score at PY_RATE calls/s."""

    def __init__(self, name, target, round_robin, phases):
        import numpy as np
        import vocabd
        self.name = name
        self.phases = phases
        self.records = []  # (phase, completion monotonic, latency s, code name or None)
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.client = vocabd.VocabdClient(target, timeout=CALL_TIMEOUT_S,
                                          lb_policy="round_robin" if round_robin else None)
        rng = np.random.default_rng(7)
        self.hidden = rng.standard_normal((2, 64)).astype(np.float32)
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True)
                        for i in range(PY_THREADS)]

    def start(self):
        for t in self.threads:
            t.start()

    def _loop(self, i):
        from vocabd import VocabdError
        gap = 1.0 / PY_RATE
        next_at = time.monotonic() + i * gap / PY_THREADS
        n = 0
        while not self.stop_flag.is_set():
            now = time.monotonic()
            if now < next_at:
                time.sleep(next_at - now)
            started = next_at  # latency from the scheduled start (open loop)
            code = None
            try:
                if n % 2 == 0:
                    self.client.embed([1, 403, 407, 9])
                else:
                    self.client.score(self.hidden, targets=[5, 6], top_k=4)
            except VocabdError as e:
                code = getattr(e.code, "name", str(e.code))
                msg = str(e)
            done = time.monotonic()
            with self.lock:
                self.records.append((self.phases.current(), done, done - started,
                                     code if code is None else (code, msg)))
            n += 1
            next_at += gap
            if next_at < done - 1.0:  # far behind: do not burst to catch up
                next_at = done

    def finish(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=CALL_TIMEOUT_S + 5)
        self.client.close()

    def per_phase(self, names):
        out = []
        for name in names:
            rows = [r for r in self.records if r[0] == name]
            lat = sorted(r[2] * 1e3 for r in rows if r[3] is None)
            errs = {}
            first = {}
            for r in rows:
                if r[3] is not None:
                    errs[r[3][0]] = errs.get(r[3][0], 0) + 1
                    first.setdefault(r[3][0], r[3][1])
            out.append({"name": name, "requests": len(rows), "ok": len(lat),
                        "errors": sum(errs.values()), "errors_by_code": errs,
                        "error_messages": first,
                        "latency_ms": {"p50": pct(lat, 50), "p99": pct(lat, 99),
                                       "max": lat[-1] if lat else 0.0}})
        return out


def pct(sorted_values, p):
    """Nearest-rank percentile (as vocabctl bench's histogram)."""
    if not sorted_values:
        return 0.0
    rank = max(1, -(-len(sorted_values) * p // 100))
    return sorted_values[int(rank) - 1]


# --------------------------------------------------------------------------
# The run.

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocabd", default=os.environ.get("VOCABD_BINARY"))
    ap.add_argument("--vocabctl", default=os.environ.get("VOCABCTL_BINARY"))
    ap.add_argument("--source", default=os.environ.get(
        "VOCABD_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    ap.add_argument("--mode", choices=["auto", "netns", "loopback"], default="auto")
    ap.add_argument("--nginx", default=shutil.which("nginx", path=os.environ.get("PATH", "")
                                                    + ":/usr/sbin:/sbin"),
                    help="the nginx binary (default: nginx on PATH or in /usr/sbin)")
    ap.add_argument("--report", help="write the measured numbers as JSON to this file")
    ap.add_argument("--keep-logs", action="store_true",
                    help="keep the replicas' and nginx's logs (their folder is printed)")
    args = ap.parse_args()
    t_begin = time.monotonic()
    # SIGTERM (a CI runner giving up) still runs the clean-up below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("fleet_test: SIGTERM"))

    nginx = args.nginx
    if not nginx or not os.access(nginx, os.X_OK):
        log(f"SKIP: nginx not installed ({nginx or 'not on PATH or in /usr/sbin'}; the proxy "
            "path needs it; deploy/dev.sh deps test installs Debian's nginx)")
        return SKIP
    for what, path in (("--vocabd", args.vocabd), ("--vocabctl", args.vocabctl)):
        if not path or not os.access(path, os.X_OK):
            log(f"error: {what} '{path}' is not an executable")
            return 2
    try:
        import grpc  # noqa: F401
        import vocabd  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        log(f"SKIP: {e} (PYTHONPATH must hold the built Python client; python3-grpcio, "
            "python3-yaml)")
        return SKIP

    mode = args.mode
    why = "--mode loopback" if mode == "loopback" else Hosts.netns_unavailable()
    if mode == "auto":
        mode = "loopback" if why else "netns"
    elif mode == "netns" and why:
        log(f"error: --mode netns: {why}")
        return 2
    hosts = Hosts(mode)
    workdir = tempfile.mkdtemp(prefix="vocabd-fleet-")
    replicas, loads, proxy = [], [], None
    bench, py, phases, proxy_rows = {}, {}, None, []
    failures = []
    report = {"mode": mode}
    try:
        try:
            hosts.setup()
        except (subprocess.CalledProcessError, RuntimeError) as e:
            if args.mode == "netns":
                raise
            detail = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
            why = f"ip netns/veth failed: {detail}"
            hosts.teardown()
            hosts = Hosts("loopback")
            hosts.setup()
            mode = report["mode"] = "loopback"
        if mode == "netns":
            log(f"mode: network namespaces: {REPLICAS} replicas at "
                + ", ".join(f"{a}:{p} ({n})" for a, p, n in
                            zip(hosts.addresses, hosts.ports, hosts.namespaces)))
        else:
            log(f"mode: loopback ports (no network namespaces: {why}): "
                + ", ".join(f"127.0.0.1:{p}" for p in hosts.ports))

        flags = configmap_flags(args.source)
        report["flags"] = flags
        model = os.path.join(args.source, "models", "stories260K", "stories260K.bin")
        deadline = t_begin + 20
        for k in range(REPLICAS):
            replicas.append(Replica(k, hosts, args.vocabd, flags, model, workdir))
            replicas[-1].start()
        for r in replicas:
            r.wait_serving(deadline)
        proxy = Nginx(nginx, [r.target for r in replicas], workdir, hosts.proxy_source)
        proxy.start(deadline)
        log(f"fleet up in {time.monotonic() - t_begin:.1f} s; nginx {nginx} at {proxy.target}; "
            f"drain timeout {flags['drain_timeout_ms']} ms (deploy/k8s/base/configmap.yaml)")

        rr_target = "ipv4:" + ",".join(r.target for r in replicas)
        phases = Phases()
        phases.mark("warm-up")
        paths = {"client-side": rr_target, "proxy": proxy.target}
        bench = {p: BenchLoad(args.vocabctl, f"vocabctl bench ({p})", t, p == "client-side")
                 for p, t in paths.items()}
        py = {p: PythonLoad(f"python client ({p})", t, p == "client-side", phases)
              for p, t in paths.items()}
        loads = list(bench.values()) + list(py.values())
        for b in bench.values():
            b.mark("warm-up")  # starts with the measurement
        for p in py.values():
            p.start()

        def mark(name):
            phases.mark(name)
            for b in bench.values():
                b.mark(name)
            log(f"[{time.monotonic() - t_begin:5.1f} s] phase: {name}")

        time.sleep(WARMUP_S)
        mark("baseline")
        time.sleep(BASELINE_S)
        # 1. SIGKILL replica 0 mid-run.
        mark("kill r0 (SIGKILL)")
        replicas[0].proc.kill()
        replicas[0].proc.wait()
        time.sleep(KILL_S)
        # 2. Drain replica 1 (SIGTERM): it must exit 0 before its drain timeout.
        mark("drain r1 (SIGTERM)")
        t_term = time.monotonic()
        replicas[1].proc.send_signal(signal.SIGTERM)
        drain_limit = flags["drain_timeout_ms"] / 1000.0 + 5
        try:
            rc = replicas[1].proc.wait(timeout=drain_limit)
        except subprocess.TimeoutExpired:
            rc = None
        drain_s = time.monotonic() - t_term
        report["drain"] = {"exit_code": rc, "seconds": round(drain_s, 3)}
        log(f"[{time.monotonic() - t_begin:5.1f} s] r1 exited {rc} after {drain_s:.2f} s of drain")
        if rc != 0:
            failures.append(f"drained replica 1 exited {rc} after {drain_s:.2f} s "
                            f"(drain timeout {flags['drain_timeout_ms']} ms):\n{replicas[1].log()}")
            if rc is None:
                replicas[1].proc.kill()
                replicas[1].proc.wait()
        time.sleep(AFTER_DRAIN_S)
        # 3. Restart both; watch them take calls of each path again.
        mark("restart r0 r1")
        t_restart = time.monotonic()
        for k in (0, 1):
            replicas[k].start()
        ready = {}
        first_call = {(k, p): None for k in (0, 1) for p in paths}
        while True:
            now = time.monotonic()
            for k in (0, 1):
                if k not in ready and grpc_health(replicas[k].target, timeout=0.2):
                    ready[k] = time.monotonic() - t_restart
                for source, n in replicas[k].calls_by_source().items():
                    p = "proxy" if source == hosts.proxy_source else "client-side"
                    if n > 0 and first_call[(k, p)] is None:
                        first_call[(k, p)] = now - t_restart
            elapsed = time.monotonic() - t_restart
            if elapsed >= RECOVER_WAIT_S or (elapsed >= RESTART_MIN_S and
                                             all(v is not None for v in first_call.values())):
                break
            time.sleep(0.1)
        report["restart"] = {"ready_s": {f"r{k}": round(v, 3) for k, v in ready.items()},
                             "first_call_s": {f"r{k} {p}": (round(v, 3) if v is not None else None)
                                              for (k, p), v in first_call.items()}}
        for (k, p), v in first_call.items():
            if v is None:
                failures.append(f"restarted replica {k} served no {p} call within "
                                f"{RECOVER_WAIT_S:.0f} s of its restart")
        mark("end")  # calls completing after this are not judged
        for p in py.values():
            p.finish()
        for p, b in bench.items():
            b.finish(timeout=CALL_TIMEOUT_S + 15)
    except Exception as e:  # noqa: BLE001 -- report, clean up, fail
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        for load in loads:
            if isinstance(load, BenchLoad):
                load.kill()
            else:
                load.stop_flag.set()
        for r in replicas:
            r.stop()
        if proxy is not None:
            proxy.stop()
            proxy_rows = proxy.access_log()
        hosts.teardown()

    if "restart" in report and all(b.result is not None for b in bench.values()):
        judge(report, bench, py, phases, proxy_rows, failures)
    report["wall_s"] = round(time.monotonic() - t_begin, 1)
    if report["wall_s"] > WALL_LIMIT_S:
        failures.append(f"the run took {report['wall_s']} s, over its {WALL_LIMIT_S:.0f} s bound")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if args.keep_logs or failures:
        log(f"logs (replica<k>-<start>.log, nginx/): {workdir}")
    if not args.keep_logs and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"wall {report['wall_s']} s, mode {report['mode']}")
    if failures:
        log("FAILED:\n  " + "\n  ".join(failures))
        return 1
    log("PASSED")
    return 0


def judge(report, bench, py, phases, proxy_rows, failures):
    """Per phase and path: calls, errors, p50/p99/max; the targets."""
    judged = [n for n in phases.names if n != "end"]
    table = {}
    for path in bench:
        b = bench[path].result
        b_phases = {ph["name"]: ph for ph in b.get("phases", [])}
        p_phases = {ph["name"]: ph for ph in py[path].per_phase(judged)}
        for name in judged:
            for who, ph in (("vocabctl bench", b_phases.get(name)), ("python", p_phases.get(name))):
                if ph is None:
                    failures.append(f"{path} {who}: no phase '{name}' reported")
                    continue
                lat = ph["latency_ms"]
                row = {"calls": ph["requests"], "errors": ph["errors"],
                       "errors_by_code": ph["errors_by_code"],
                       "p50_ms": round(lat["p50"], 3), "p99_ms": round(lat["p99"], 3),
                       "max_ms": round(lat["max"], 3)}
                table.setdefault(path, {}).setdefault(name, {})[who] = row
                if ph["errors"]:
                    failures.append(f"{path} path, {who}, phase '{name}': {ph['errors']} of "
                                    f"{ph['requests']} calls failed: {ph['errors_by_code']} "
                                    f"(e.g. {ph.get('error_messages')})")
        # Throughput back: 0.5 s windows of this path's bench after the
        # restart reach 90 % of its baseline rate.
        windows = b.get("windows", [])
        base = b_phases.get("baseline")
        restart = b_phases.get("restart r0 r1")
        if base and restart and windows:
            base_rate = base["requests"] / max(1e-9, base["end_s"] - base["start_s"])
            back = None
            for w in windows:
                if w["start_s"] >= restart["start_s"] and (w["ok"] / 0.5) >= 0.9 * base_rate:
                    back = max(0.0, w["start_s"] + 0.5 - restart["start_s"])
                    break
            report.setdefault("throughput_back_s", {})[path] = (
                round(back, 2) if back is not None else None)
            report.setdefault("baseline_rate", {})[path] = round(base_rate, 1)
            if back is None or back > RECOVER_WAIT_S:
                failures.append(f"{path}: completed calls per 0.5 s window not back to 90 % of "
                                f"the baseline {base_rate:.0f}/s within {RECOVER_WAIT_S:.0f} s "
                                "of the restart")
    report["phases"] = table
    proxy_errors = {}
    codes = {"1": "CANCELLED", "4": "DEADLINE_EXCEEDED", "8": "RESOURCE_EXHAUSTED",
             "13": "INTERNAL", "14": "UNAVAILABLE", "": "no status"}
    for t, _, status, grpc_status, _ in proxy_rows:
        if status != 200 or grpc_status != "0":
            name = phases.at_wall(t) or "before"
            key = (f"HTTP {status}" if status != 200
                   else codes.get(grpc_status, f"grpc-status {grpc_status}"))
            proxy_errors.setdefault(name, {}).setdefault(key, 0)
            proxy_errors[name][key] += 1
    report["nginx_errors_by_phase"] = proxy_errors
    log(f"{'path':<12} {'phase':<20} {'client':<15} {'calls':>6} {'errors':>6} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for path, per in table.items():
        for name, rows in per.items():
            for who, r in rows.items():
                log(f"{path:<12} {name:<20} {who:<15} {r['calls']:>6} {r['errors']:>6} "
                    f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['max_ms']:>8.2f}"
                    + (f"  {r['errors_by_code']}" if r["errors"] else ""))
    log("restart: ready after " + ", ".join(f"{k} {v} s" for k, v in
                                            report["restart"]["ready_s"].items())
        + "; first call after " + ", ".join(f"{k} {v} s" for k, v in
                                            report["restart"]["first_call_s"].items()))
    log(f"nginx answers other than 200/grpc-status 0 (re-sent by the clients' retry policy), "
        f"by phase: {proxy_errors}")
    log(f"throughput back to 90 % of baseline after: {report.get('throughput_back_s')} s "
        f"(baseline {report.get('baseline_rate')} calls/s per path, vocabctl bench)")


if __name__ == "__main__":
    sys.exit(main())
