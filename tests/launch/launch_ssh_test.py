#!/usr/bin/python3
"""scripts/launch_ssh.sh's credentials: the token it makes for a run and hands to every task.

Without --auth_token_file, --tls_cert or --insecure among the task flags, the launcher makes
RUN_DIR/launch/token (mode 0600, 64 hex characters), copies it to every node at the same path
(ssh path; tests/testing/fake_ssh.sh stands in for ssh and runs the remote command here) and
starts every task with --auth_token_file=RUN_DIR/launch/token; with --exec (hosts sharing this
filesystem) nothing is copied. Checked on real files: the token's mode and bytes, the one copy
per node, every task's command line (stand-in binaries record it and what they read), and that
the token itself never appears in a command the launcher runs, in its output or in a task's
command line. With credentials of the user's own, or the opt-out, no token is made or passed.
Last, the real binaries on this machine's own non-loopback address (protected mode refuses
such a spec without credentials) train through the ssh path with the launcher's token.

  /usr/bin/python3 tests/launch/launch_ssh_test.py      (FULCRUM_BIN_DIR, default build/bin)
"""

import hashlib
import json
import os
import random
import shutil
import socket
import stat
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH = os.path.join(ROOT, "scripts", "launch_ssh.sh")
FAKE_SSH = os.path.join(ROOT, "tests", "testing", "fake_ssh.sh")
BIN_DIR = os.path.abspath(os.environ.get("FULCRUM_BIN_DIR") or os.path.join(ROOT, "build", "bin"))
DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
TASKS = ["chief-0", "ps-0", "worker-0", "worker-1"]

# A stand-in for ps, worker and chief: records its arguments, the mode and a digest of the
# token file it was given, in RUN_DIR/JOB-INDEX/ (the launcher gathers that folder back).
FAKE_BINARY = r"""#!/bin/bash
set -eu
tok=""
for a in "$@"; do
  case "$a" in
    --run_dir=*) run=${a#*=} ;; --job_name=*) job=${a#*=} ;; --task_index=*) i=${a#*=} ;;
    --auth_token_file=*) tok=${a#*=} ;;
  esac
done
mkdir -p "$run/$job-$i"
printf '%s\n' "$@" > "$run/$job-$i/argv"
if [[ -n "$tok" && -e "$tok" ]]; then
  stat -c %a "$tok" > "$run/$job-$i/token_mode"
  sha256sum < "$tok" | cut -d' ' -f1 > "$run/$job-$i/token_sha256"
fi
"""

# Logs every command line it is given (one per line, shell-quoted), then runs the rest.
LOGGER = r"""#!/bin/bash
{ printf '%q ' "$@"; echo; } >> "$(dirname "$0")/$(basename "$0").log"
"""


def write_script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def free_ports(host, n):
    rng = random.Random(os.getpid())
    ports = []
    while len(ports) < n:
        p = rng.randrange(20000, 60000)
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            try:
                s.bind((host, p))
            except OSError:
                continue
        if p not in ports:
            ports.append(p)
    return ports


def own_address():
    """An IPv4 address of this machine that is not loopback, or None."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                             capture_output=True, text=True, timeout=10).stdout
    except OSError:
        return None
    for line in out.splitlines():
        fields = line.split()
        if "inet" in fields:
            return fields[fields.index("inet") + 1].split("/")[0]
    return None


class LaunchSshTokenTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fulcrum-launch-")
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for job in ("ps", "worker", "chief"):
            write_script(os.path.join(self.bin, job), FAKE_BINARY)
        # ssh: logged, then fake_ssh.sh; --exec: logged, then the command without its host.
        self.ssh = os.path.join(self.tmp, "ssh")
        write_script(self.ssh, LOGGER + 'exec %s "$@"\n' % FAKE_SSH)
        self.exec = os.path.join(self.tmp, "exec")
        write_script(self.exec, LOGGER + 'shift\nexec "$@"\n')
        self.spec = os.path.join(self.tmp, "spec.json")
        with open(self.spec, "w") as f:
            json.dump({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
                       "worker": ["127.0.0.1:3", "127.0.0.1:4"]}, f)
        self.hosts = os.path.join(self.tmp, "hosts.json")  # two "nodes"
        with open(self.hosts, "w") as f:
            json.dump({"chief:0": "node-a", "ps:0": "node-a", "worker:0": "node-b",
                       "worker:1": "node-b"}, f)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def launch(self, run_dir, flags, ssh=True, bin_dir=None, spec=None, hosts=True, timeout=60):
        cmd = [LAUNCH, "--remote_dir", ROOT, "--bin_dir", bin_dir or self.bin, "--run_dir", run_dir]
        cmd += ["--ssh", self.ssh] if ssh else ["--exec", self.exec + " {host}", "--ssh", "false"]
        if hosts:
            cmd += ["--hosts", self.hosts]
        r = subprocess.run(cmd + [spec or self.spec] + flags, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return r.returncode, r.stdout + r.stderr

    def log(self, name):
        path = os.path.join(self.tmp, name + ".log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return f.read().splitlines()

    def argv(self, run_dir, task):
        with open(os.path.join(run_dir, task, "argv")) as f:
            return f.read().splitlines()

    def read(self, *path):
        with open(os.path.join(*path)) as f:
            return f.read()

    def check_token_run(self, run_dir, out, flags):
        """The launcher made one token and every task got its path, never its bytes."""
        token_file = os.path.join(run_dir, "launch", "token")
        self.assertIn("made a token for this run in %s" % token_file, out)
        self.assertEqual(stat.S_IMODE(os.stat(token_file).st_mode), 0o600)
        token = self.read(token_file)
        self.assertRegex(token, r"^[0-9a-f]{64}\n$")
        digest = hashlib.sha256(token.encode()).hexdigest()
        self.assertNotIn(token.strip(), out)
        for task in TASKS:
            argv = self.argv(run_dir, task)
            self.assertEqual([a for a in argv if "auth_token_file" in a],
                             ["--auth_token_file=" + token_file], task)
            # After the launcher's flags, before the user's (which may override them).
            self.assertEqual(argv[argv.index("--auth_token_file=" + token_file) + 1:], flags)
            self.assertNotIn(token.strip(), "\n".join(argv))
            self.assertEqual(self.read(run_dir, task, "token_mode").strip(), "600", task)
            self.assertEqual(self.read(run_dir, task, "token_sha256").strip(), digest, task)
            self.assertNotIn(token.strip(), self.read(run_dir, "launch", task + ".log"))
        for line in self.log("ssh") + self.log("exec"):
            self.assertNotIn(token.strip(), line)
        return token_file

    def test_ssh_path_makes_a_token_and_copies_it_to_every_node(self):
        run_dir = os.path.join(self.tmp, "run dir")  # a space: quoted on the remote side
        flags = ["--model=logreg", "--train_steps=10"]
        code, out = self.launch(run_dir, flags)
        self.assertEqual(code, 0, out)
        token_file = self.check_token_run(run_dir, out, flags)
        copies = [line for line in self.log("ssh") if "launch/token.launch-tmp" in line]
        self.assertEqual(sorted(line.split(" ")[0] for line in copies), ["node-a", "node-b"])
        for line in copies:  # written private from the first byte, then moved into place
            self.assertIn("umask 077", line)
            self.assertIn("chmod 600", line)
        self.assertEqual(self.log("exec"), [])
        self.assertFalse(os.path.exists(token_file + ".launch-tmp"))
        self.assertFalse(os.path.exists(token_file + ".tmp"))

    def test_exec_hook_makes_a_token_and_copies_nothing(self):
        run_dir = os.path.join(self.tmp, "run")
        flags = ["--model=logreg", "--insecure=false"]  # not the opt-out
        code, out = self.launch(run_dir, flags, ssh=False)
        self.assertEqual(code, 0, out)
        self.check_token_run(run_dir, out, flags)
        self.assertEqual(self.log("ssh"), [])
        self.assertEqual(len(self.log("exec")), len(TASKS))  # one command per task, no copy

    def test_a_new_run_gets_a_new_token(self):
        run_dir = os.path.join(self.tmp, "run")
        tokens = []
        for _ in range(2):
            code, out = self.launch(run_dir, ["--model=logreg"], ssh=False)
            self.assertEqual(code, 0, out)
            tokens.append(self.read(run_dir, "launch", "token"))
        self.assertNotEqual(tokens[0], tokens[1])

    def test_own_credentials_or_insecure_get_no_token(self):
        for extra in (["--auth_token_file=/own/token"], ["--auth_token_file", "/own/token"],
                      ["--tls_cert=certs/{task}.pem"], ["--tls_cert", "certs/{task}.pem"],
                      ["--insecure"], ["--insecure=true"], ["-insecure"]):
            with self.subTest(extra=extra):
                run_dir = os.path.join(self.tmp, "own-%d" % random.randrange(10**9))
                flags = ["--model=logreg"] + extra
                code, out = self.launch(run_dir, flags, ssh=False)
                self.assertEqual(code, 0, out)
                self.assertNotIn("made a token", out)
                self.assertFalse(os.path.exists(os.path.join(run_dir, "launch", "token")))
                for task in TASKS:
                    argv = self.argv(run_dir, task)
                    self.assertEqual(argv[argv.index("--model=logreg"):], flags, task)
                    self.assertNotIn("launch/token", "\n".join(argv))
        # Through ssh: no token copied either.
        run_dir = os.path.join(self.tmp, "own-ssh")
        code, out = self.launch(run_dir, ["--model=logreg", "--auth_token_file=/own/token"])
        self.assertEqual(code, 0, out)
        self.assertEqual([line for line in self.log("ssh") if "launch/token" in line], [])
        self.assertFalse(os.path.exists(os.path.join(run_dir, "launch", "token")))

    def test_tasks_failing_together_give_their_exit_code(self):
        # Every task refusing its flags at once (exit 2, as protected mode does without
        # credentials): the launcher returns 2, whichever order bash collects them in.
        fail = os.path.join(self.tmp, "fail")
        os.mkdir(fail)
        for job in ("ps", "worker", "chief"):
            write_script(os.path.join(fail, job), "#!/bin/sh\necho refused >&2\nexit 2\n")
        for attempt in range(5):
            code, out = self.launch(os.path.join(self.tmp, "fail-%d" % attempt), ["--x"],
                                    ssh=False, bin_dir=fail)
            self.assertEqual(code, 2, out)
            self.assertIn("exited with code 2", out)
            self.assertNotIn("unbound variable", out)

    def test_real_binaries_train_on_a_non_loopback_spec_with_the_token(self):
        for b in ("ps", "worker", "chief"):
            if not os.access(os.path.join(BIN_DIR, b), os.X_OK):
                self.skipTest("no %s in %s: build first (cmake --build build)" % (b, BIN_DIR))
        if not os.path.exists(DATA):
            self.skipTest("the dataset-fashion-mnist package is not installed")
        address = own_address()
        if address is None:
            self.skipTest("this machine has no non-loopback IPv4 address")
        for attempt in range(2):
            ports = free_ports(address, 4)
            spec = os.path.join(self.tmp, "real-spec-%d.json" % attempt)
            with open(spec, "w") as f:
                json.dump({"chief": ["%s:%d" % (address, ports[0])],
                           "ps": ["%s:%d" % (address, ports[1])],
                           "worker": ["%s:%d" % (address, p) for p in ports[2:]]}, f)
            run_dir = os.path.join(self.tmp, "real-%d" % attempt)
            code, out = self.launch(
                run_dir, ["--model=logreg", "--batch_size=32", "--train_steps=30",
                          "--mode=async", "--eval_every=0", "--threads=1",
                          "--startup_timeout=60"], bin_dir=BIN_DIR, spec=spec, hosts=False,
                timeout=240)
            logs = "".join(self.read(run_dir, "launch", t + ".log") for t in TASKS
                           if os.path.exists(os.path.join(run_dir, "launch", t + ".log")))
            if code != 0 and attempt == 0 and "in use" in logs:  # a port taken meanwhile
                continue
            break
        self.assertEqual(code, 0, out + logs)
        token = self.read(run_dir, "launch", "token").strip()
        self.assertNotIn(token, out + logs)
        with open(os.path.join(run_dir, "report.json")) as f:
            report = json.load(f)
        self.assertFalse(report.get("failed"), report.get("stop_reason"))
        self.assertEqual(len(report["tasks"]), 4)
        for task in TASKS:
            self.assertTrue(os.path.exists(os.path.join(run_dir, task, "summary.json")), task)


if __name__ == "__main__":
    unittest.main(verbosity=2)
