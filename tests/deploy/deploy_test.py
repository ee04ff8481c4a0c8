#!/usr/bin/python3
"""deploy/: the container entrypoint and the Kubernetes manifests, run without Kubernetes.

Every pod of deploy/statefulset.yaml and of deploy/tfjob.yaml is started here as Kubernetes
would start it in the image: deploy/entrypoint.sh with the manifest's args, the pod's hostname
and its environment (the manifest's env; for the TFJob the TF_CONFIG that Kubeflow's training
operator writes for that manifest), running this build's binaries (FULCRUM_BIN_DIR, which the
Dockerfile sets to the image's folder). Only the addresses move to loopback: the StatefulSet
pods get FULCRUM_ADDRESS_PATTERN=127.0.0.1:{port} with a port per task (FULCRUM_PORT_STRIDE=1),
the TFJob's TF_CONFIG has each Service name replaced by 127.0.0.1:PORT; the addresses the pods
use in a cluster are checked with FULCRUM_DRY_RUN=1 (the command the entrypoint would run).
Every pod gets the run's token as Kubernetes mounts the Secret fulcrum-token: FULCRUM_TOKEN_FILE
names a file here, mode 0440 for the StatefulSet run (what the kubelet makes of defaultMode 0400
with the pod's fsGroup: the entrypoint hands the task a private copy) and 0600 elsewhere; the
token itself never shows. The entrypoint's other credential cases: deploy_credentials_test.py.
Checked: the 1 chief + 1 ps + 2 worker run of each manifest completes (every pod exits 0, or
idles after exit 0 as the StatefulSet asks, and report.json is written); bad input (a hostname
beyond the replica count, unparseable, missing or wrong settings) exits 2 at once naming the
problem, with nothing left running; SIGTERM reaches the task.

  /usr/bin/python3 tests/deploy/deploy_test.py      (FULCRUM_BIN_DIR, default build/bin)

The manifests are read with Debian's python3-yaml; without it the manifest checks are skipped,
naming why, and the runs use the same values (FALLBACK_* below).
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTRYPOINT = os.path.join(ROOT, "deploy", "entrypoint.sh")
BIN_DIR = os.path.abspath(os.environ.get("FULCRUM_BIN_DIR") or os.path.join(ROOT, "build", "bin"))
NAMESPACE = "default"  # where `kubectl apply` puts manifests that name none
RUN_TIMEOUT = 150  # seconds for a whole run (CTest may run other clusters beside it)

try:
    import yaml
except ImportError:  # python3-yaml is not among scripts/setup.sh's packages
    yaml = None
NO_YAML = "python3-yaml is not installed (apt-get install python3-yaml): manifest not read"

# The manifests' values, for a machine without python3-yaml (checked against them when it has).
FALLBACK_ARGS = ["--model=mlp", "--dataset=mnist", "--optimizer=adam", "--learning_rate=0.001",
                 "--batch_size=128", "--train_steps=600", "--mode=sync", "--eval_every=200",
                 "--run_dir=/runs/fulcrum-mnist"]
FALLBACK_STS = {"name": "fulcrum", "port": 2222, "replicas": {"chief": 1, "ps": 1, "worker": 2},
                "env": {"FULCRUM_CHIEF_REPLICAS": "1", "FULCRUM_PS_REPLICAS": "1",
                        "FULCRUM_WORKER_REPLICAS": "2", "FULCRUM_PORT": "2222",
                        "FULCRUM_IDLE_AFTER_SUCCESS": "1", "POD_NAMESPACE": NAMESPACE}}
FALLBACK_TFJOB = {"name": "fulcrum-mnist", "port": 2222,
                  "replicas": {"Chief": 1, "PS": 1, "Worker": 2}}
JOB_OF_REPLICA_TYPE = {"chief": "chief", "master": "chief", "ps": "ps", "worker": "worker"}
# Where the manifests mount the Secret fulcrum-token's key `token` (the entrypoint's default).
TOKEN_MOUNT = "/etc/fulcrum/token/token"


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def container_env(container, pod_name):
    """A container's env as the kubelet sets it (values and the downward API's fields)."""
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        values = {"metadata.namespace": NAMESPACE, "metadata.name": pod_name}
        if field not in values:
            raise AssertionError("env %s: valueFrom %r is not emulated by this test"
                                 % (e["name"], e.get("valueFrom")))
        env[e["name"]] = values[field]
    return env


def statefulset_layout():
    """{name, port, replicas, args, pods: [(pod, job, index, env)], services}"""
    if yaml is None:
        f = FALLBACK_STS
        pods = [("%s-%s-%d" % (f["name"], job, i), job, i, dict(f["env"]))
                for job in ("chief", "ps", "worker") for i in range(f["replicas"][job])]
        return {"name": f["name"], "port": f["port"], "replicas": f["replicas"],
                "args": FALLBACK_ARGS, "pods": pods, "services": {}}
    docs = load("deploy/statefulset.yaml")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    layout = {"replicas": {}, "pods": [], "services": services, "args": None, "port": None}
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        m = re.fullmatch(r"(.+)-(chief|ps|worker)", sts["metadata"]["name"])
        assert m, "StatefulSet %s is not NAME-JOB" % sts["metadata"]["name"]
        layout["name"], job = m.group(1), m.group(2)
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        layout["replicas"][job] = sts["spec"]["replicas"]
        layout["args"] = container["args"]
        layout["port"] = container["ports"][0]["containerPort"]
        for i in range(sts["spec"]["replicas"]):
            pod = "%s-%d" % (sts["metadata"]["name"], i)  # a StatefulSet pod's name = hostname
            layout["pods"].append((pod, job, i, container_env(container, pod)))
    order = {"chief": 0, "ps": 1, "worker": 2}
    layout["pods"].sort(key=lambda p: (order[p[1]], p[2]))
    return layout


def tfjob_layout():
    """{name, port, replicas: {ReplicaType: n}, args, env}"""
    if yaml is None:
        return dict(FALLBACK_TFJOB, args=FALLBACK_ARGS, env={})
    (job,) = load("deploy/tfjob.yaml")
    layout = {"name": job["metadata"]["name"], "replicas": {}, "args": None, "env": {}}
    for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
        layout["replicas"][rtype] = spec["replicas"]
        (c,) = [c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
        layout["args"] = c["args"]
        layout["port"] = [p for p in c["ports"] if p["name"] == "tfjob-port"][0]["containerPort"]
    return layout


def operator_tf_config(layout, rtype, index):
    """TF_CONFIG exactly as the training operator (v1.9) sets it: genTFConfigJSONStr in
    pkg/controller.v1/tensorflow/tensorflow.go. Cluster keys are the lowercased replica types,
    addresses JOB-RTYPE-INDEX.NAMESPACE.svc:PORT (the per-replica headless Service), encoded by
    Go's json.Marshal: struct fields in order, map keys sorted, no spaces."""
    cluster = {}
    for rt, n in layout["replicas"].items():
        cluster[rt.lower()] = ["%s-%s-%d.%s.svc:%d" % (layout["name"], rt.lower(), i, NAMESPACE,
                                                      layout["port"]) for i in range(n)]
    config = {"cluster": dict(sorted(cluster.items())),
              "task": {"type": rtype.lower(), "index": index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def consecutive_free_ports(n):
    """A base port with base..base+n-1 free on 127.0.0.1 (a StatefulSet's stride of 1)."""
    rng = random.Random(os.getpid() ^ int(time.time()))
    for _ in range(200):
        base = rng.randrange(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no %d consecutive free ports" % n)


def session_members(sid):
    """PIDs whose session is `sid` (every process a pod started, as new_session gave it)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry))
    return members


def session_left(sid, timeout=10.0):
    """session_members(sid) once it is empty or `timeout` seconds have passed: a loaded
    machine can take a moment to end a process after its parent has exited."""
    deadline = time.time() + timeout
    left = session_members(sid)
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = session_members(sid)
    return left


def base_env(home):
    # A container's environment: PATH and HOME; the pod's own variables are added per pod.
    # The mounted Secret: home/token (write_token), where the manifests put TOKEN_MOUNT.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
            "FULCRUM_BIN_DIR": BIN_DIR, "TMPDIR": home,
            "FULCRUM_TOKEN_FILE": os.path.join(home, "token")}


def write_token(path, mode=0o600):
    """A token file as a mounted Secret holds it (`openssl rand -hex 32`); the token."""
    token = os.urandom(32).hex()
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(token)
    os.chmod(path, mode)
    return token


def with_run_dir(args, run_dir):
    out = [a for a in args if not a.startswith("--run_dir=")]
    return out + ["--run_dir=" + run_dir]


class Pod:
    """deploy/entrypoint.sh started as a pod's main process, in a session of its own."""

    def __init__(self, name, env, args, log_dir):
        self.name = name
        self.log_path = os.path.join(log_dir, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([ENTRYPOINT] + list(args), env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def idling(self):
        return "exited 0; idling" in self.output()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()


class DeployTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for b in ("ps", "worker", "chief"):
            if not os.access(os.path.join(BIN_DIR, b), os.X_OK):
                raise unittest.SkipTest("no %s in %s: build first (cmake --build build)"
                                        % (b, BIN_DIR))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fulcrum-deploy-")
        self.pods = []
        self.token = write_token(os.path.join(self.tmp, "token"))

    def tearDown(self):
        for pod in self.pods:
            pod.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self):
        return "\n".join("---- %s\n%s" % (p.name, p.output()[-3000:]) for p in self.pods)

    def assert_no_token_shown(self, text):
        self.assertNotIn(self.token, text, "the token itself was printed")

    def entrypoint(self, env, args=(), timeout=20):
        """Runs the entrypoint to its end; (code, output, processes left in its session)."""
        proc = subprocess.Popen([ENTRYPOINT] + list(args), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            self.fail("entrypoint still running after %ds:\n%s" % (timeout, out))
        left = session_left(proc.pid, timeout=5.0)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return proc.returncode, out, left

    def wait_run(self, run_dir):
        """Waits until every pod exited 0 or idles after exit 0; fails on any other exit."""
        deadline = time.time() + RUN_TIMEOUT
        while time.time() < deadline:
            for p in self.pods:
                code = p.proc.poll()
                if code not in (None, 0):
                    self.fail("%s exited with code %d\n%s" % (p.name, code, self.logs()))
            if all(p.proc.poll() == 0 or p.idling() for p in self.pods):
                break
            time.sleep(0.2)
        else:
            self.fail("the run did not finish within %ds\n%s" % (RUN_TIMEOUT, self.logs()))
        report = os.path.join(run_dir, "report.json")
        self.assertTrue(os.path.exists(report), "no report.json\n" + self.logs())
        with open(report) as f:
            r = json.load(f)
        self.assertFalse(r.get("failed"), r.get("stop_reason"))
        self.assertEqual((r.get("num_ps"), r.get("num_workers")), (1, 2))
        for task in ("chief-0", "ps-0", "worker-0", "worker-1"):
            self.assertTrue(os.path.exists(os.path.join(run_dir, task, "summary.json")), task)
        return r

    # ---- the manifests (parsed; the entrypoint's naming against the Services) ----

    def test_manifests_agree_with_the_entrypoint(self):
        if yaml is None:
            self.skipTest(NO_YAML)
        sts = statefulset_layout()
        self.assertEqual(sts["replicas"], FALLBACK_STS["replicas"])
        self.assertEqual(sts["args"], FALLBACK_ARGS)
        for pod, job, index, env in sts["pods"]:
            self.assertEqual(env, FALLBACK_STS["env"], pod)
            for j, n in sts["replicas"].items():
                self.assertEqual(env.get("FULCRUM_%s_REPLICAS" % j.upper()), str(n),
                                 "%s: FULCRUM_%s_REPLICAS must equal the StatefulSet's replicas"
                                 % (pod, j.upper()))
        templates = [d["spec"]["template"] for d in load("deploy/statefulset.yaml")
                     if d["kind"] == "StatefulSet"]
        templates += [r["template"] for r in load("deploy/tfjob.yaml")[0]["spec"]
                      ["tfReplicaSpecs"].values()]
        self.assertEqual(len(templates), 6)
        for t in templates:  # every pod mounts the Secret where the entrypoint looks
            (c,) = t["spec"]["containers"]
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            self.assertEqual(mounts["token"]["mountPath"], os.path.dirname(TOKEN_MOUNT))
            self.assertTrue(mounts["token"].get("readOnly"))
            volumes = {v["name"]: v for v in t["spec"]["volumes"]}
            self.assertEqual(volumes["token"]["secret"], {
                "secretName": "fulcrum-token", "defaultMode": 0o400, "optional": True})
            self.assertIn("fsGroup", t["spec"]["securityContext"])  # the group that reads it
        for d in load("deploy/statefulset.yaml"):
            spec = d["spec"]
            if d["kind"] == "Service":
                self.assertEqual(spec["clusterIP"], "None", d["metadata"]["name"])
                self.assertTrue(spec.get("publishNotReadyAddresses"), d["metadata"]["name"])
            else:
                self.assertEqual(spec["serviceName"], d["metadata"]["name"])
                self.assertIn(spec["serviceName"], sts["services"])
                self.assertEqual(spec["selector"]["matchLabels"],
                                 spec["template"]["metadata"]["labels"])
                self.assertEqual(sts["services"][spec["serviceName"]]["spec"]["selector"],
                                 spec["template"]["metadata"]["labels"])
        (job,) = load("deploy/tfjob.yaml")
        self.assertEqual((job["apiVersion"], job["kind"]), ("kubeflow.org/v1", "TFJob"))
        tf = tfjob_layout()
        self.assertEqual(tf["replicas"], FALLBACK_TFJOB["replicas"])
        for rtype, spec in job["spec"]["tfReplicaSpecs"].items():
            (c,) = spec["template"]["spec"]["containers"]
            self.assertEqual(c["name"], "tensorflow", rtype)
            self.assertEqual(c["args"], FALLBACK_ARGS, rtype)
            self.assertEqual(c["ports"], [{"name": "tfjob-port", "containerPort": 2222}], rtype)
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            self.assertEqual(mounts.get("runs"), "/runs", rtype)
            self.assertIn("runs", [v["name"] for v in spec["template"]["spec"]["volumes"]])

    def test_statefulset_pods_resolve_their_cluster_names(self):
        # The command each pod runs in a cluster: its binary, the DNS names of the Services.
        layout = statefulset_layout()
        names = {}
        for job in ("chief", "ps", "worker"):
            names[job] = ",".join(
                "%s-%s-%d.%s-%s.%s.svc.cluster.local:%d" % (layout["name"], job, i,
                                                            layout["name"], job, NAMESPACE,
                                                            layout["port"])
                for i in range(layout["replicas"][job]))
        for pod, job, index, env in layout["pods"]:
            e = dict(base_env(self.tmp), HOSTNAME=pod, FULCRUM_DRY_RUN="1", **env)
            code, out, left = self.entrypoint(e, layout["args"])
            self.assertEqual(code, 0, out)
            command = out.strip().splitlines()[-1].split(" ")
            self.assertEqual(command[0], os.path.join(BIN_DIR, job))
            self.assertEqual(command[1:7], [
                "--chief_hosts=" + names["chief"], "--ps_hosts=" + names["ps"],
                "--worker_hosts=" + names["worker"], "--job_name=" + job,
                "--task_index=%d" % index, "--auth_token_file=" + e["FULCRUM_TOKEN_FILE"]])
            self.assertEqual(command[7:], layout["args"])
            self.assertEqual(left, [])
            self.assert_no_token_shown(out)

    def test_tfjob_pods_choose_their_binary(self):
        layout = tfjob_layout()
        for rtype, n in layout["replicas"].items():
            for i in range(n):
                pod = "%s-%s-%d" % (layout["name"], rtype.lower(), i)
                e = dict(base_env(self.tmp), HOSTNAME=pod, FULCRUM_DRY_RUN="1",
                         TF_CONFIG=operator_tf_config(layout, rtype, i), **layout["env"])
                code, out, _ = self.entrypoint(e, layout["args"])
                self.assertEqual(code, 0, out)
                self.assertIn("TF_CONFIG: %s:%d at %s.%s.svc:%d" % (
                    rtype.lower(), i, pod, NAMESPACE, layout["port"]), out)
                job = JOB_OF_REPLICA_TYPE[rtype.lower()]
                # The binary reads TF_CONFIG itself: only the token and the manifest's args.
                self.assertEqual(out.strip().splitlines()[-1].split(" "),
                                 [os.path.join(BIN_DIR, job),
                                  "--auth_token_file=" + e["FULCRUM_TOKEN_FILE"]] + layout["args"])
                self.assert_no_token_shown(out)

    # ---- whole runs ----

    def test_statefulset_run_completes(self):
        layout = statefulset_layout()
        # The Secret as the kubelet mounts it with the pods' fsGroup: group-readable.
        os.chmod(os.path.join(self.tmp, "token"), 0o440)
        for attempt in range(2):
            run_dir = os.path.join(self.tmp, "sts-run-%d" % attempt)
            base = consecutive_free_ports(len(layout["pods"]))
            args = with_run_dir(layout["args"], run_dir)
            for pod, job, index, env in layout["pods"]:
                e = dict(base_env(self.tmp), HOSTNAME=pod, **env)
                # Loopback instead of the Services' DNS names: one port per task.
                e.update(FULCRUM_ADDRESS_PATTERN="127.0.0.1:{port}", FULCRUM_PORT=str(base),
                         FULCRUM_PORT_STRIDE="1")
                self.pods.append(Pod(pod, e, args, self.tmp))
            try:
                report = self.wait_run(run_dir)
                break
            except AssertionError:
                if attempt == 0 and "cannot listen" in self.logs():  # a port taken meanwhile
                    for p in self.pods:
                        p.kill()
                    self.pods = []
                    continue
                raise
        self.assertIn("reached train_steps", report["stop_reason"])
        for p in self.pods:
            self.assertIn("the task reads a private copy", p.output(), p.name)
            self.assert_no_token_shown(p.output())
        idle = [p for p in self.pods if p.proc.poll() is None]
        if all(env.get("FULCRUM_IDLE_AFTER_SUCCESS") == "1" for _, _, _, env in layout["pods"]):
            self.assertEqual(len(idle), len(self.pods), "every pod idles after exit 0")
        # Deleting the pods: SIGTERM to each main process ends it at once with exit 0.
        for p in idle:
            os.kill(p.proc.pid, signal.SIGTERM)
        for p in idle:
            self.assertEqual(p.proc.wait(timeout=10), 0, p.name)
        for p in self.pods:
            self.assertEqual(session_left(p.proc.pid), [], p.name + " left processes")

    def test_tfjob_run_completes(self):
        layout = tfjob_layout()
        tasks = [(rt, i) for rt in sorted(layout["replicas"], key=lambda r: (
            ["chief", "master", "ps", "worker"].index(r.lower()))) for i in
                 range(layout["replicas"][rt])]
        for attempt in range(2):
            run_dir = os.path.join(self.tmp, "tfjob-run-%d" % attempt)
            base = consecutive_free_ports(len(tasks))
            loopback = {}
            for k, (rt, i) in enumerate(tasks):
                loopback["%s-%s-%d.%s.svc:%d" % (layout["name"], rt.lower(), i, NAMESPACE,
                                                 layout["port"])] = "127.0.0.1:%d" % (base + k)
            for rt, i in tasks:
                config = operator_tf_config(layout, rt, i)
                for name, address in loopback.items():
                    config = config.replace('"%s"' % name, '"%s"' % address)
                self.assertNotIn(".svc:", config)
                pod = "%s-%s-%d" % (layout["name"], rt.lower(), i)
                e = dict(base_env(self.tmp), HOSTNAME=pod, TF_CONFIG=config, **layout["env"])
                self.pods.append(Pod(pod, e, with_run_dir(layout["args"], run_dir), self.tmp))
            try:
                report = self.wait_run(run_dir)
                break
            except AssertionError:
                if attempt == 0 and "cannot listen" in self.logs():
                    for p in self.pods:
                        p.kill()
                    self.pods = []
                    continue
                raise
        self.assertIn("reached train_steps", report["stop_reason"])
        for p in self.pods:  # TFJob pods end (the job succeeds when the chief exits 0)
            self.assertEqual(p.proc.wait(timeout=30), 0, p.name)
            self.assert_no_token_shown(p.output())
            self.assertEqual(session_left(p.proc.pid), [], p.name + " left processes")

    # ---- bad input: exit 2 at once, naming the problem, nothing left running ----

    def test_bad_input_exits_2(self):
        sts = dict(FALLBACK_STS["env"])
        if yaml is not None:
            sts = statefulset_layout()["pods"][0][3]
        tf_layout = tfjob_layout()
        cases = [
            ("a hostname beyond the replicas", dict(sts, HOSTNAME="fulcrum-worker-7"),
             "hostname 'fulcrum-worker-7': worker index 7 is beyond FULCRUM_WORKER_REPLICAS=2"),
            ("an unparseable hostname", dict(sts, HOSTNAME="build-host"),
             "hostname 'build-host' is not NAME-JOB-INDEX"),
            ("an unknown job", dict(sts, HOSTNAME="fulcrum-evaluator-0"),
             "hostname 'fulcrum-evaluator-0' is not NAME-JOB-INDEX"),
            ("no worker replicas",
             {k: v for k, v in dict(sts, HOSTNAME="fulcrum-ps-0").items()
              if k != "FULCRUM_WORKER_REPLICAS"}, "FULCRUM_WORKER_REPLICAS is not set"),
            ("no ps replicas",
             {k: v for k, v in dict(sts, HOSTNAME="fulcrum-ps-0").items()
              if k != "FULCRUM_PS_REPLICAS"}, "FULCRUM_PS_REPLICAS is not set"),
            ("a word for a count", dict(sts, HOSTNAME="fulcrum-ps-0", FULCRUM_PS_REPLICAS="two"),
             "FULCRUM_PS_REPLICAS='two': expected a whole number from 1 to 10000"),
            ("two chiefs", dict(sts, HOSTNAME="fulcrum-ps-0", FULCRUM_CHIEF_REPLICAS="2"),
             "FULCRUM_CHIEF_REPLICAS='2': expected a whole number from 0 to 1"),
            ("a chief pod without a chief", dict(sts, HOSTNAME="fulcrum-chief-0",
                                                 FULCRUM_CHIEF_REPLICAS="0"),
             "job chief has no task (FULCRUM_CHIEF_REPLICAS=0: worker 0 is the chief)"),
            ("a bad port", dict(sts, HOSTNAME="fulcrum-ps-0", FULCRUM_PORT="70000"),
             "FULCRUM_PORT='70000': expected a whole number from 1 to 65535"),
            ("no namespace", {k: v for k, v in dict(sts, HOSTNAME="fulcrum-ps-0").items()
                              if k != "POD_NAMESPACE"}, "no namespace: set FULCRUM_NAMESPACE"),
            ("no binaries", dict(sts, HOSTNAME="fulcrum-ps-0", FULCRUM_BIN_DIR="/nonexistent"),
             "no executable /nonexistent/ps"),
            ("TF_CONFIG not JSON", {"TF_CONFIG": '{"cluster": '}, "TF_CONFIG: not valid JSON"),
            ("TF_CONFIG without a task", {"TF_CONFIG": '{"cluster": {}}'},
             "TF_CONFIG: no task.type"),
            ("an evaluator", {"TF_CONFIG": operator_tf_config(tf_layout, "Evaluator", 0)},
             "TF_CONFIG task.type 'evaluator': Fulcrum runs chief (or master), ps and worker"),
            # The binary itself refuses a task index outside the spec (exit 2, naming it).
            ("TF_CONFIG's index beyond the workers",
             {"TF_CONFIG": operator_tf_config(tf_layout, "Worker", 5)},
             "TF_CONFIG task index 5: the cluster spec has 2 worker task(s)"),
        ]
        for what, env, message in cases:
            with self.subTest(what):
                e = base_env(self.tmp)
                e.update(env)
                start = time.time()
                code, out, left = self.entrypoint(e, FALLBACK_ARGS)
                self.assertEqual(code, 2, out)
                self.assertIn(message, out)
                self.assertLess(time.time() - start, 10, "exit 2 at once")
                self.assertEqual(left, [], "processes left running: %s" % left)
                self.assertNotIn("listening on", out)

    def test_sigterm_reaches_the_task(self):
        # A pod deleted while its task runs: the entrypoint (the StatefulSet's idle mode keeps
        # it as the main process) passes SIGTERM on; the task ends with 143 and nothing stays.
        layout = statefulset_layout()
        pod, job, index, env = [p for p in layout["pods"] if p[1] == "ps"][0]
        e = dict(base_env(self.tmp), HOSTNAME=pod, **env)
        e.update(FULCRUM_ADDRESS_PATTERN="127.0.0.1:{port}",
                 FULCRUM_PORT=str(consecutive_free_ports(len(layout["pods"]))),
                 FULCRUM_PORT_STRIDE="1", FULCRUM_IDLE_AFTER_SUCCESS="1")
        p = Pod(pod, e, with_run_dir(layout["args"], os.path.join(self.tmp, "term")), self.tmp)
        self.pods.append(p)
        deadline = time.time() + 30
        while "listening on" not in p.output() and time.time() < deadline:
            self.assertIsNone(p.proc.poll(), p.output())
            time.sleep(0.1)
        self.assertIn("listening on", p.output())
        os.kill(p.proc.pid, signal.SIGTERM)
        self.assertEqual(p.proc.wait(timeout=20), 143, p.output())
        self.assertIn("ps:0 exited with code 143", p.output())
        self.assertEqual(session_left(p.proc.pid), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
