"""A real Kubernetes control plane for the cluster tests (issue 21): etcd, kube-apiserver, kube-scheduler,
kube-controller-manager and kwok from `make tools`, on loopback ports, in a temporary folder, with certificates and
service-account keys made for the run. Every process is stopped by its own pid when the tests end, pass or fail, and
dies with the process that started it when that one is killed before its teardown runs (issue 54: spawn_server).

Nodes are kwok's: Node objects with the capacity a scenario writes into their status, kept Ready by kwok, which
also turns the pods scheduled onto them Running. No kubelet, no container runtime, no network."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIN = Path(__file__).resolve().parents[2] / "build" / "tools" / "bin"
TOOLS = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok")
READY_TIMEOUT = 120.0
# The one user whose every request the API server writes to `audit.log` (read_audit): a suite that claims to read only
# is run as this user and judged by what the server saw.
AUDITED_USER = "read-only-suite"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _dies_with_parent() -> Callable[[], None]:
    """What the server's child runs between fork and exec: the kernel sends it SIGKILL when the process that
    started it dies (PR_SET_PDEATHSIG, kept across exec). A SIGTERM from CI's time limit, a SIGKILL of pytest or of
    an xdist worker skip every fixture's teardown; without this the servers would run on, reparented, for ever.
    libc is loaded here, in the parent: the child only calls into it (no dlopen between fork and exec)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    # int prctl(int option, unsigned long arg2, ...): each argument a full unsigned long, as glibc reads them
    prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def in_child() -> None:
        if prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl(PR_SET_PDEATHSIG): {os.strerror(errno)}")
        if os.getppid() != parent:  # the parent died between fork and prctl: no signal will come, so go now
            os._exit(1)

    return in_child


def spawn_server(argv: list[str], log: Path, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """The one way a long-lived server of these tests is started: its output into `log`, in a session of its own
    (ControlPlane.stop signals its process group), killed by the kernel when the process that started it dies.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process. The fixtures start servers
    from the main thread (pytest runs tests there; pytest-xdist's workers too, its execmodel is main_thread_only),
    which ends only with the process; a server started from another thread would be killed when that thread
    returned, as a random crash, so that is refused here instead."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(f"{argv[0]}: servers are started from the main thread only (PR_SET_PDEATHSIG would kill "
                           "this one when the thread starting it ends)")
    with log.open("wb") as out:  # the child holds its own copy of the descriptor
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=_dies_with_parent())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(folder: Path) -> None:
    """A CA, the API server's serving certificate (127.0.0.1, localhost), an admin client certificate
    (system:masters) and the service-account key pair."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=gpu-platform-test-ca", cwd=folder)
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n")
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject, ext in (("server", "/CN=kube-apiserver", "server.ext"),
                               ("admin", "/O=system:masters/CN=admin", "client.ext")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subject, cwd=folder)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", "-extfile", ext, cwd=folder)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)


@dataclass
class ControlPlane:
    root: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    api_port: int = 0
    kubeconfig: Path = Path()

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    def user_kubeconfig(self, user: str) -> Path:
        """A kubeconfig for `user` (a client certificate signed by this plane's CA, no group): what it may do is what
        RBAC grants that name."""
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{user}.key", "-out", f"{user}.csr",
                 "-subj", f"/CN={user}", cwd=self.pki)
        _openssl("x509", "-req", "-in", f"{user}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{user}.crt", "-days", "2", "-extfile", "client.ext", cwd=self.pki)
        config = json.loads(self.kubeconfig.read_text())
        config["users"] = [{"name": user, "user": {"client-certificate": str(self.pki / f"{user}.crt"),
                                                   "client-key": str(self.pki / f"{user}.key")}}]
        config["contexts"] = [{"name": "test", "context": {"cluster": "test", "user": user}}]
        path = self.root / f"{user}.kubeconfig"
        path.write_text(json.dumps(config))
        return path

    def read_audit(self, user: str = AUDITED_USER) -> list[dict[str, Any]]:
        """Every request `user` made, as the API server's audit log has it (one event per request)."""
        if not self.audit_log.is_file():
            return []
        events = [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]
        return [e for e in events if e.get("user", {}).get("username") == user]

    def start(self) -> None:
        missing = [t for t in TOOLS if not (BIN / t).is_file()]
        if missing:
            raise RuntimeError(f"{BIN}: {', '.join(missing)} not built; hint: run `make tools`")
        make_pki(self.pki)
        etcd_port, peer_port = free_port(), free_port()
        self._spawn("etcd", [
            str(BIN / "etcd"), "--name", "test", "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer_port}", "--log-level", "warn"])
        self._wait_http(f"http://127.0.0.1:{etcd_port}/health", "etcd")
        self.api_port = free_port()
        p = self.pki
        (self.root / "audit-policy.yaml").write_text(json.dumps({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
            "rules": [{"level": "Metadata", "users": [AUDITED_USER]}, {"level": "None"}]}))
        self._spawn("kube-apiserver", [
            str(BIN / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--tls-cert-file={p / 'server.crt'}", f"--tls-private-key-file={p / 'server.key'}",
            f"--client-ca-file={p / 'ca.crt'}", f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc", "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true", f"--cert-dir={self.root / 'certs'}",
            f"--audit-policy-file={self.root / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
            "--v=0"])
        self._write_kubeconfig()
        self._wait(lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, "kube-apiserver")
        kc = str(self.kubeconfig)
        kcm_port, scheduler_port, kwok_port = free_port(), free_port(), free_port()
        self._spawn("kube-controller-manager", [
            str(BIN / "kube-controller-manager"), f"--kubeconfig={kc}", "--leader-elect=false",
            f"--service-account-private-key-file={p / 'sa.key'}", f"--root-ca-file={p / 'ca.crt'}",
            "--use-service-account-credentials=false", "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
            # node lifecycle stays on: it lifts the not-ready taint admission puts on a new node once kwok reports
            # it Ready, as on a real cluster
            "--controllers=*,-nodeipam,-cloud-node-lifecycle", f"--cert-dir={self.root / 'kcm'}"])
        self._spawn("kube-scheduler", [
            str(BIN / "kube-scheduler"), f"--kubeconfig={kc}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--secure-port={scheduler_port}"])
        self._spawn("kwok", [
            str(BIN / "kwok"), f"--kubeconfig={kc}", f"--config={BIN / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake", "--cidr=10.244.0.1/16",
            "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{kwok_port}"])
        # each healthy by its own endpoint (the two controllers serve theirs on TLS with a self-signed certificate)
        self._wait_http(f"https://127.0.0.1:{kcm_port}/healthz", "kube-controller-manager")
        self._wait_http(f"https://127.0.0.1:{scheduler_port}/healthz", "kube-scheduler")
        self._wait_http(f"http://127.0.0.1:{kwok_port}/healthz", "kwok")
        # the controller manager makes the default ServiceAccount of each namespace; pods need it
        self._wait(lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default",
                                        check=False).returncode == 0, "kube-controller-manager")

    def _write_kubeconfig(self) -> None:
        """The admin's kubeconfig for this API server: its CA, the admin's client certificate."""
        p = self.pki
        self.kubeconfig = self.root / "admin.kubeconfig"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": f"https://127.0.0.1:{self.api_port}",
                                                      "certificate-authority": str(p / "ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(p / "admin.crt"),
                                                 "client-key": str(p / "admin.key")}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}]}))

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.processes[name] = spawn_server(argv, self.root / f"{name}.log", self.root)

    def _alive(self, what: str) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                tail = (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}:\n{tail}")

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            self._alive(what)
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"{what} not ready within {READY_TIMEOUT:.0f} s; logs in {self.root}")

    def _wait_http(self, url: str, what: str) -> None:
        import ssl
        import urllib.request

        # the controllers' serving certificates are self-signed, made at their start: nothing to verify against
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE

        def up() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2, context=insecure) as r:
                    return r.status == 200
            except OSError:
                return False

        self._wait(up, what)

    def stop(self) -> None:
        """Every process this control plane started, by its own pid (and its process group), in reverse order."""
        for proc in reversed(list(self.processes.values())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", *args], input=input, text=True,
                              capture_output=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done

    def apply(self, objects: list[dict[str, Any]] | dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
        items = objects if isinstance(objects, list) else [objects]
        return self.kubectl("apply", "-f", "-", *extra, input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                          "items": items}))

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def add_node(self, name: str, gpus: int | None) -> None:
        """A kwok node named as a stack's node; `gpus` the gpu.intel.com/i915 it advertises (None: none)."""
        capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        if gpus is not None:
            capacity["gpu.intel.com/i915"] = str(gpus)
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64",
                                        "type": "kwok"}},
                "spec": {}, "status": {"capacity": capacity, "allocatable": capacity}}
        self.apply(node)
        # kwok keeps the status it finds; the API server's create drops status, so it is written through the
        # status subresource
        self.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
                     json.dumps({"status": {"capacity": capacity, "allocatable": capacity}}))

        def ready() -> bool:
            node = self.get("node", name)
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            return conditions.get("Ready") == "True" and not node["spec"].get("taints")

        self.wait_for(f"node {name} Ready and untainted", ready)

    def wait_for(self, what: str, ready: Any, timeout: float = 90.0) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self._alive(what)
            last = ready()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


# --- Flux: kustomize-controller fed by a served artifact ------------------------------------------------------------

class ArtifactServer:
    """The repository as source-controller would hand it over: a tarball over HTTP on loopback, named by its digest.
    A GitRepository object carries it in `status.artifact`, written here through the status subresource, as
    kustomize-controller's own test suite does (no source-controller runs)."""

    def __init__(self, root: Path) -> None:
        import functools
        import http.server
        import threading

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
                pass  # one line per fetch on stderr says nothing the controller's own log does not

        handler = functools.partial(Quiet, directory=str(root))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, plane: ControlPlane, repo: Path, name: str = "flux-system", namespace: str = "flux-system",
                ) -> str:
        """A tarball of `repo` served, and the GitRepository `namespace/name` pointing at it, Ready. Returns the
        revision."""
        import datetime
        import hashlib
        import tarfile

        staging = self.root / "staging.tar.gz"
        with tarfile.open(staging, "w:gz") as tar:
            for path in sorted(repo.rglob("*")):
                if path.is_file():
                    tar.add(path, arcname=path.relative_to(repo).as_posix())
        data = staging.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        (self.root / f"{digest}.tar.gz").write_bytes(data)
        revision = f"main@sha1:{hashlib.sha1(data).hexdigest()}"
        plane.apply({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                     "metadata": {"name": name, "namespace": namespace},
                     "spec": {"interval": "1m", "url": "https://git.example.invalid/home-ops.git",
                              "ref": {"branch": "main"}}})
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        generation = plane.get("gitrepository.source.toolkit.fluxcd.io", name, "-n", namespace)["metadata"][
            "generation"]
        status = {"observedGeneration": generation,
                  "artifact": {"path": f"gitrepository/{namespace}/{name}/{digest}.tar.gz",
                               "url": f"http://127.0.0.1:{self.server.server_address[1]}/{digest}.tar.gz",
                               "revision": revision, "digest": f"sha256:{digest}", "lastUpdateTime": now,
                               "size": len(data)},
                  "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": revision,
                                  "lastTransitionTime": now, "observedGeneration": generation},
                                 {"type": "ArtifactInStorage", "status": "True", "reason": "Succeeded",
                                  "message": revision, "lastTransitionTime": now,
                                  "observedGeneration": generation}]}
        plane.kubectl("patch", "gitrepository.source.toolkit.fluxcd.io", name, "-n", namespace,
                      "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))
        return revision

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_kustomize_controller(plane: ControlPlane) -> None:
    """Flux's kustomize-controller against this API server, watching every namespace, retrying dependencies every
    2 s (its flag; the Kustomizations' own intervals come from the stack config); returns once it is healthy."""
    health = free_port()
    plane.processes["kustomize-controller"] = spawn_server(
        [str(BIN / "kustomize-controller"), "--enable-leader-election=false",
         "--watch-all-namespaces=true", "--requeue-dependency=2s", f"--metrics-addr=127.0.0.1:{free_port()}",
         f"--health-addr=127.0.0.1:{health}", "--no-remote-bases=true", "--log-level=info"],
        plane.root / "kustomize-controller.log", plane.root,
        env={**os.environ, "RUNTIME_NAMESPACE": "flux-system", "KUBECONFIG": str(plane.kubeconfig)})
    plane._wait_http(f"http://127.0.0.1:{health}/readyz", "kustomize-controller")


def condition(obj: dict[str, Any], kind: str = "Ready") -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})
