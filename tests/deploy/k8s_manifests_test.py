#!/usr/bin/env python3
"""Checks deploy/k8s and the Dockerfile agree: every manifest parses, probes
use gRPC on the gRPC port, ports/user/image agree with the Dockerfile,
selectors match the pod labels, ConfigMap keys are real vocabd env vars.

Usage: /usr/bin/python3 tests/deploy/k8s_manifests_test.py <repo root>
Needs Debian's python3-yaml. Exit code 0 = all checks passed.
"""
import os
import re
import sys
import unittest

import yaml

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
K8S = os.path.join(ROOT, "deploy", "k8s")


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def parse_dockerfile():
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    stages = re.split(r"^FROM ", text, flags=re.M)
    runtime = stages[-1]
    info = {"stages": [s.split()[0:3] for s in stages[1:]]}
    info["expose"] = sorted(int(p) for line in re.findall(r"^EXPOSE (.+)$", runtime, re.M)
                            for p in line.split())
    info["user"] = re.search(r"^USER (\d+):(\d+)", runtime, re.M).groups()
    env = {}
    for line in re.findall(r"^ENV (.+)$", runtime, re.M):
        for k, v in re.findall(r"(\w+)=(\S+)", line):
            env[k] = v
    info["env"] = env
    info["label_version"] = re.search(r'org\.opencontainers\.image\.version="([^"]+)"', runtime).group(1)
    info["title"] = re.search(r'org\.opencontainers\.image\.title="([^"]+)"', runtime).group(1)
    info["healthcheck"] = re.search(r"^HEALTHCHECK .*CMD (\[.*\])", runtime, re.M).group(1)
    info["entrypoint"] = re.search(r"^ENTRYPOINT (\[.*\])", runtime, re.M).group(1)
    info["copies"] = re.findall(r"^COPY (?!--from)(\S+) (\S+)", runtime, re.M)
    return info


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def mem_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for u, m in units.items():
        if q.endswith(u):
            return int(q[:-2]) * m
    return int(q)


class K8sManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = {}
        for dirpath, _, names in os.walk(K8S):
            for n in names:
                if n.endswith((".yaml", ".yml")):
                    p = os.path.join(dirpath, n)
                    cls.files[os.path.relpath(p, K8S)] = load_docs(p)
        cls.base = {}
        for rel, docs in cls.files.items():
            if rel.startswith("base" + os.sep):
                for d in docs:
                    cls.base[(d["kind"], d["metadata"]["name"]) if "metadata" in d else (d["kind"], rel)] = d
        cls.docker = parse_dockerfile()
        cls.deploy = cls.base[("Deployment", "vocabd")]
        cls.pod = cls.deploy["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]
        cls.ports = {p["name"]: p["containerPort"] for p in cls.container["ports"]}
        cls.config = cls.base[("ConfigMap", "vocabd-flags")]["data"]
        with open(os.path.join(ROOT, "server", "main.cc")) as f:
            cls.env_names = set(re.findall(r'envname\("(\w+)"\)', f.read()))

    def test_every_manifest_parses_and_has_kind(self):
        self.assertGreaterEqual(len(self.files), 10)
        for rel, docs in self.files.items():
            self.assertTrue(docs, rel)
            for d in docs:
                self.assertIn("kind", d, rel)
                self.assertIn("apiVersion", d, rel)

    def test_kustomizations_reference_existing_files(self):
        for rel, docs in self.files.items():
            if os.path.basename(rel) != "kustomization.yaml":
                continue
            here = os.path.dirname(os.path.join(K8S, rel))
            for r in docs[0].get("resources", []):
                self.assertTrue(os.path.exists(os.path.join(here, r)), f"{rel}: {r}")
            for p in docs[0].get("patches", []):
                self.assertTrue(os.path.exists(os.path.join(here, p["path"])), f"{rel}: {p}")
        base_kust = self.files[os.path.join("base", "kustomization.yaml")][0]
        listed = set(base_kust["resources"])
        on_disk = {os.path.basename(r) for r in self.files if r.startswith("base" + os.sep)}
        self.assertEqual(listed, on_disk - {"kustomization.yaml"})

    def test_probes_use_grpc_on_the_grpc_port(self):
        grpc_port = self.ports["grpc"]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            self.assertIn(probe, self.container)
            self.assertIn("grpc", self.container[probe], probe)
            self.assertEqual(self.container[probe]["grpc"]["port"], grpc_port, probe)

    def test_ports_agree_with_dockerfile_and_flags(self):
        self.assertEqual(sorted(self.ports.values()), self.docker["expose"])
        self.assertEqual(port_of(self.docker["env"]["VOCABD_LISTEN"]), self.ports["grpc"])
        self.assertEqual(port_of(self.docker["env"]["VOCABD_METRICS_LISTEN"]), self.ports["metrics"])
        self.assertEqual(port_of(self.config["VOCABD_LISTEN"]), self.ports["grpc"])
        self.assertEqual(port_of(self.config["VOCABD_METRICS_LISTEN"]), self.ports["metrics"])
        self.assertEqual(port_of(self.docker["env"]["VOCABD_HTTP_LISTEN"]), self.ports["http"])
        self.assertEqual(port_of(self.config["VOCABD_HTTP_LISTEN"]), self.ports["http"])
        ann = self.pod["metadata"]["annotations"]
        self.assertEqual(int(ann["prometheus.io/port"]), self.ports["metrics"])

    def test_image_and_user_agree_with_dockerfile(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            version = re.search(r"project\(vocabd VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(self.docker["label_version"], version)
        self.assertEqual(self.container["image"], self.docker["title"])
        base_kust = self.files[os.path.join("base", "kustomization.yaml")][0]
        image = base_kust["images"][0]
        self.assertEqual(image["name"], self.container["image"])
        self.assertEqual(image["newTag"], version)
        # deploy/container-test.sh tags what it builds as the same name:version.
        with open(os.path.join(ROOT, "deploy", "container-test.sh")) as f:
            tagged = re.search(r'IMAGE="\$\{VOCABD_IMAGE:-localhost/([\w.-]+):\$VERSION\}"', f.read())
        self.assertIsNotNone(tagged, "container-test.sh default IMAGE")
        self.assertEqual(tagged.group(1), self.container["image"])
        # ... and the base deploys exactly that image (not docker.io/library/vocabd).
        self.assertEqual(image.get("newName"), "localhost/" + tagged.group(1))
        uid, gid = self.docker["user"]
        sc = self.pod["spec"]["securityContext"]
        self.assertEqual(str(sc["runAsUser"]), uid)
        self.assertEqual(str(sc["runAsGroup"]), gid)
        csc = self.container.get("securityContext", {})
        if "runAsUser" in csc:
            self.assertEqual(str(csc["runAsUser"]), uid)
        if "runAsGroup" in csc:
            self.assertEqual(str(csc["runAsGroup"]), gid)
        self.assertEqual(self.docker["stages"][0][0], "debian:bookworm")
        self.assertEqual(self.docker["stages"][-1][0], "debian:bookworm-slim")
        self.assertIn("vocabctl", self.docker["healthcheck"])
        self.assertIn("health", self.docker["healthcheck"])
        self.assertIn("vocabd", self.docker["entrypoint"])

    def test_security_context_is_non_root_read_only(self):
        sc = self.container["securityContext"]
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertTrue(sc["runAsNonRoot"])
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertTrue(self.pod["spec"]["securityContext"]["runAsNonRoot"])

    def test_selectors_match_pod_labels(self):
        labels = self.pod["metadata"]["labels"]

        def subset(sel, what):
            for k, v in sel.items():
                self.assertEqual(labels.get(k), v, f"{what}: {k}")

        subset(self.deploy["spec"]["selector"]["matchLabels"], "Deployment")
        subset(self.base[("Service", "vocabd")]["spec"]["selector"], "Service")
        headless = self.base[("Service", "vocabd-headless")]
        subset(headless["spec"]["selector"], "headless Service")
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        subset(self.base[("PodDisruptionBudget", "vocabd")]["spec"]["selector"]["matchLabels"], "PDB")
        target = self.base[("HorizontalPodAutoscaler", "vocabd")]["spec"]["scaleTargetRef"]
        self.assertEqual((target["kind"], target["name"]), ("Deployment", "vocabd"))
        for svc in (self.base[("Service", "vocabd")], headless):
            for p in svc["spec"]["ports"]:
                self.assertIn(p["targetPort"], self.ports, svc["metadata"]["name"])

    def test_configmap_keys_are_vocabd_env_vars_and_model_is_in_the_image(self):
        self.assertEqual(self.container["envFrom"][0]["configMapRef"]["name"], "vocabd-flags")
        for key in self.config:
            self.assertIn(key, self.env_names, f"ConfigMap key {key} is not a vocabd env var")
        for key in self.docker["env"]:
            if key.startswith("VOCABD_") and key != "VOCABD_TARGET":
                self.assertIn(key, self.env_names, f"Dockerfile ENV {key}")
        model_path = self.config["VOCABD_MODEL"].split("=", 1)[1]
        copies = dict((dst, src) for src, dst in self.docker["copies"])
        self.assertIn("/opt/vocabd/models/", copies)
        rel = model_path[len("/opt/vocabd/models/"):]
        self.assertTrue(os.path.exists(os.path.join(ROOT, copies["/opt/vocabd/models/"], rel)), rel)

    def test_native_grpc_probes_state_the_kubernetes_version(self):
        with open(os.path.join(K8S, "base", "deployment.yaml")) as f:
            self.assertRegex(f.read(), r"Kubernetes >= 1\.24")

    def overlay_container(self, name):
        patch = self.files[os.path.join("overlays", name, "deployment-patch.yaml")][0]
        return patch["spec"]["template"]["spec"], patch["spec"]["template"]["spec"]["containers"][0]

    def test_model_repository_overlay_mounts_a_read_only_volume(self):
        pod, c = self.overlay_container("model-repository")
        args = c["args"]
        root = args[args.index("--model-repository") + 1]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        self.assertIn(root, mounts)
        self.assertTrue(mounts[root]["readOnly"])
        self.assertIn("/tmp", mounts)  # the base's tmp mount survives the list merge
        volumes = {v["name"]: v for v in pod["volumes"]}
        claim = volumes[mounts[root]["name"]]["persistentVolumeClaim"]["claimName"]
        pvc = self.files[os.path.join("overlays", "model-repository", "models-pvc.yaml")][0]
        self.assertEqual((pvc["kind"], pvc["metadata"]["name"]), ("PersistentVolumeClaim", claim))
        self.assertIn("ReadOnlyMany", pvc["spec"]["accessModes"])

    def test_tls_overlay_exec_probes_name_the_server(self):
        pod, c = self.overlay_container("tls")
        env = {e["name"]: e["value"] for e in c["env"]}
        for k in env:
            self.assertIn(k, self.env_names)
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            cmd = c[probe]["exec"]["command"]
            self.assertEqual(c[probe]["$patch"], "replace", probe)
            self.assertEqual(cmd[-1], "health")
            self.assertTrue(cmd[0].endswith("/vocabctl"))
            # 127.0.0.1 is not in the certificate: the probe names the server.
            self.assertIn("--tls-server-name", cmd)
            for flag in ("--ca", "--cert", "--key"):
                self.assertTrue(cmd[cmd.index(flag) + 1].startswith(mounts["tls"] + "/"), flag)
            self.assertEqual(port_of(cmd[cmd.index("--target") + 1]), self.ports["grpc"])

    def test_resources_fit_the_model_and_drain_fits_grace_period(self):
        res = self.container["resources"]
        model = self.config["VOCABD_MODEL"].split("=", 1)[1][len("/opt/vocabd/models/"):]
        model_bytes = os.path.getsize(os.path.join(ROOT, "models", model))
        self.assertGreaterEqual(mem_bytes(res["requests"]["memory"]), (64 << 20) + model_bytes)
        self.assertLessEqual(mem_bytes(res["requests"]["memory"]), mem_bytes(res["limits"]["memory"]))
        drain_ms = int(self.config["VOCABD_DRAIN_TIMEOUT_MS"])
        pre_stop = int(self.container["lifecycle"]["preStop"]["exec"]["command"][-1])
        self.assertGreater(self.pod["spec"]["terminationGracePeriodSeconds"] * 1000,
                           drain_ms + pre_stop * 1000)

    def test_probe_timing_fits_the_fleet_recovery_budget(self):
        # deploy/k8s/README.md "Readiness and drain": a restarted replica must
        # be Ready and take calls within 10 s (tests/deploy/fleet_test.py), so
        # startup period + readiness period stay well inside it; the TLS
        # overlay's exec probes keep the same timing.
        timing = {p: (self.container[p]["periodSeconds"], self.container[p]["failureThreshold"])
                  for p in ("startupProbe", "readinessProbe", "livenessProbe")}
        self.assertLessEqual(timing["startupProbe"][0] + timing["readinessProbe"][0], 5)
        self.assertLessEqual(timing["readinessProbe"][0] * timing["readinessProbe"][1], 5)
        _, tls = self.overlay_container("tls")
        for probe, t in timing.items():
            self.assertEqual((tls[probe]["periodSeconds"], tls[probe]["failureThreshold"]), t, probe)


if __name__ == "__main__":
    unittest.main(verbosity=2)
