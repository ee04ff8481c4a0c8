#!/usr/bin/python3
"""deploy/entrypoint.sh's credentials, without Kubernetes: what the binary gets on top of the
args (FULCRUM_DRY_RUN=1 prints the command) for each way the run's token can be there or not.

  - The Secret mounted (FULCRUM_TOKEN_FILE, a file here): --auth_token_file=<it> after the
    launcher's flags, before the args; mode 0440 (defaultMode 0400 plus the kubelet's group
    read for the pod's fsGroup): a private copy instead, mode 0600, same bytes, under TMPDIR.
  - No Secret: the StatefulSet and TFJob pods exit 2 naming the kubectl command that makes it
    (the manifests' mount path, /etc/fulcrum/token/token, is the default); FULCRUM_INSECURE=1
    gives --insecure instead; FULCRUM_INSECURE=1 with a token, or with --auth_token_file or
    --tls_cert among the args, exits 2; so does a FULCRUM_INSECURE other than 0 or 1.
  - Args that carry --auth_token_file, --tls_cert or --insecure (--x=v, --x v; not
    --insecure=false) get nothing added.
  - Explicit mode (`entrypoint.sh worker ...`) adds the token when it is mounted, needs none.
The token itself never appears in the output. Whole runs with a token: deploy_test.py.

  /usr/bin/python3 tests/deploy/deploy_credentials_test.py   (FULCRUM_BIN_DIR, default build/bin)
"""

import os
import shutil
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_test  # noqa: E402  (the layouts, TF_CONFIG and the entrypoint runner)
from deploy_test import BIN_DIR, FALLBACK_ARGS, FALLBACK_STS, TOKEN_MOUNT  # noqa: E402

NO_SECRET = "kubectl create secret generic fulcrum-token"


class CredentialsTest(unittest.TestCase):
    setUpClass = deploy_test.DeployTest.setUpClass
    entrypoint = deploy_test.DeployTest.entrypoint

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fulcrum-deploy-cred-")
        self.token_file = os.path.join(self.tmp, "token")
        self.token = deploy_test.write_token(self.token_file)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pods(self):
        """(what, env) of a StatefulSet pod and a TFJob pod, each with the token mounted."""
        tf = deploy_test.tfjob_layout()
        base = dict(deploy_test.base_env(self.tmp), FULCRUM_DRY_RUN="1")
        return [("statefulset", dict(base, HOSTNAME="fulcrum-ps-0", **FALLBACK_STS["env"])),
                ("tfjob", dict(base, HOSTNAME="fulcrum-mnist-worker-1",
                               TF_CONFIG=deploy_test.operator_tf_config(tf, "Worker", 1)))]

    def command(self, env, args):
        """The command the entrypoint would run (exit 0 expected), as a list."""
        code, out, left = self.entrypoint(env, args)
        self.assertEqual(code, 0, out)
        self.assertEqual(left, [])
        self.assertNotIn(self.token, out, "the token itself was printed")
        return out.strip().splitlines()[-1].split(" ")

    def added(self, env, args):
        """What the entrypoint put between its own flags and the args."""
        command = self.command(env, args)
        self.assertEqual(command[len(command) - len(args):], list(args))
        own = [a for a in command[1:len(command) - len(args)]
               if not a.startswith(("--chief_hosts=", "--ps_hosts=", "--worker_hosts=",
                                    "--job_name=", "--task_index="))]
        return own

    def test_mounted_token_is_passed(self):
        for what, env in self.pods():
            with self.subTest(what):
                self.assertEqual(self.added(env, FALLBACK_ARGS),
                                 ["--auth_token_file=" + self.token_file])

    def test_group_readable_secret_gets_a_private_copy(self):
        os.chmod(self.token_file, 0o440)
        for what, env in self.pods():
            with self.subTest(what):
                code, out, _ = self.entrypoint(env, FALLBACK_ARGS)
                self.assertEqual(code, 0, out)
                self.assertIn("is mode 440", out)
                (flag,) = self.added(env, FALLBACK_ARGS)
                copy = flag[len("--auth_token_file="):]
                self.assertNotEqual(copy, self.token_file)
                self.assertTrue(copy.startswith(self.tmp + "/"), copy)  # under TMPDIR
                st = os.stat(copy)
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
                self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(copy)).st_mode), 0o700)
                with open(copy) as f:
                    self.assertEqual(f.read(), self.token)

    def test_no_secret_exits_2_naming_how_to_make_it(self):
        if os.path.exists(TOKEN_MOUNT):
            self.skipTest("%s exists on this machine" % TOKEN_MOUNT)
        for what, env in self.pods():
            with self.subTest(what):
                del env["FULCRUM_TOKEN_FILE"]  # the default: the manifests' mount
                code, out, left = self.entrypoint(env, FALLBACK_ARGS)
                self.assertEqual(code, 2, out)
                self.assertIn("no token at %s" % TOKEN_MOUNT, out)
                self.assertIn(NO_SECRET, out)
                self.assertIn("FULCRUM_INSECURE=1", out)
                self.assertEqual(left, [])
        # A dangling FULCRUM_TOKEN_FILE is no token either.
        env = dict(self.pods()[0][1], FULCRUM_TOKEN_FILE=os.path.join(self.tmp, "none"))
        code, out, _ = self.entrypoint(env, FALLBACK_ARGS)
        self.assertEqual(code, 2, out)
        self.assertIn(NO_SECRET, out)

    def test_insecure_opt_out(self):
        for what, env in self.pods():
            with self.subTest(what):
                env.update(FULCRUM_INSECURE="1", FULCRUM_TOKEN_FILE=os.path.join(self.tmp, "no"))
                self.assertEqual(self.added(env, FALLBACK_ARGS), ["--insecure"])
                # Not together with a token: mounted, or among the args.
                for token_env, args, says in [
                        (self.token_file, FALLBACK_ARGS, "but a token is mounted at"),
                        (env["FULCRUM_TOKEN_FILE"], FALLBACK_ARGS + ["--auth_token_file=/t"],
                         "and credentials (--auth_token_file or --tls_cert) among the args")]:
                    code, out, _ = self.entrypoint(dict(env, FULCRUM_TOKEN_FILE=token_env), args)
                    self.assertEqual(code, 2, out)
                    self.assertIn(says, out)
                code, out, _ = self.entrypoint(dict(env, FULCRUM_INSECURE="yes"), FALLBACK_ARGS)
                self.assertEqual(code, 2, out)
                self.assertIn("FULCRUM_INSECURE='yes': expected a whole number from 0 to 1", out)

    def test_credentials_among_the_args_get_nothing_added(self):
        for what, env in self.pods():
            for extra in (["--auth_token_file=/own/token"], ["--auth_token_file", "/own/token"],
                          ["--tls_cert=certs/ps-0.pem"], ["--tls_cert", "c.pem"],
                          ["--insecure"], ["--insecure=true"]):
                with self.subTest(what, extra=extra):
                    self.assertEqual(self.added(env, FALLBACK_ARGS + extra), [])
            with self.subTest(what, extra="--insecure=false"):  # not the opt-out
                self.assertEqual(self.added(env, FALLBACK_ARGS + ["--insecure=false"]),
                                 ["--auth_token_file=" + self.token_file])

    def test_explicit_job_takes_the_token_when_mounted(self):
        env = dict(deploy_test.base_env(self.tmp), FULCRUM_DRY_RUN="1")
        args = ["--model=logreg", "--train_steps=10"]
        self.assertEqual(self.command(env, ["worker"] + args),
                         [os.path.join(BIN_DIR, "worker"),
                          "--auth_token_file=" + self.token_file] + args)
        env["FULCRUM_TOKEN_FILE"] = os.path.join(self.tmp, "none")  # single mode needs none
        self.assertEqual(self.command(env, ["worker"] + args),
                         [os.path.join(BIN_DIR, "worker")] + args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
