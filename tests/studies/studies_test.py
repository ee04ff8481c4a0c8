#!/usr/bin/python3
"""The studies' machinery on real files and real processes: studies/lib/points.sh (resume,
settings, failures, other sources), the tables of the Lu/OSU and CS744 studies from files
shaped as grpc_bench and the chief write them, and every study's bad input (exit 2, named)."""
import csv
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDIES = os.path.join(ROOT, "studies")
sys.path.insert(0, STUDIES)


def sh(script, env=None, timeout=60):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


class PointsTest(unittest.TestCase):
    """A study's points: finished ones are reused, changed ones rerun, a failure stops the
    study naming its log and keeps what finished, points of another source are named."""

    def study(self, out, arg="one", fail=False):
        return sh("""set -euo pipefail
source %s/lib/points.sh
points_begin %s 3 demo
points_estimate 30
point a 10 -- bash -c 'echo a >> %s/ran'
point b 10 -- fresh %s/b bash -c 'mkdir -p %s/b; echo b >> %s/ran'
point c 10 -- %s %s
points_end
""" % (STUDIES, out, out, out, out, out, "false" if fail else "echo", arg))

    def test_resume_settings_failure_and_sources(self):
        with tempfile.TemporaryDirectory() as out:
            first = self.study(out)
            self.assertEqual(first.returncode, 0, first.stderr)
            self.assertIn("[3/3] c: ok in", first.stdout)
            self.assertIn("3 point(s)", first.stdout)
            with open(os.path.join(out, "ran")) as f:
                self.assertEqual(f.read().split(), ["a", "b"])
            # The same command again: nothing reruns.
            again = self.study(out)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertEqual(again.stdout.count("from an earlier start"), 3)
            with open(os.path.join(out, "ran")) as f:
                self.assertEqual(f.read().split(), ["a", "b"])
            # Another setting of c: c reruns, a and b do not.
            other = self.study(out, arg="two")
            self.assertIn("c ran before with other settings: running it again", other.stdout)
            self.assertEqual(other.stdout.count("from an earlier start"), 2)
            # A failing point: exit 1, its log named; the finished records stay.
            failed = self.study(out, fail=True)
            self.assertEqual(failed.returncode, 1)
            self.assertIn("c: failed (exit 1)", failed.stderr)
            self.assertIn(os.path.join(out, "points", "c.log"), failed.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "points", "a.json")))
            self.assertFalse(os.path.exists(os.path.join(out, "points", "c.json")))
            # A record from another commit is reused, and the end says so.
            record = os.path.join(out, "points", "a.json")
            with open(record) as f:
                text = f.read()
            with open(record, "w") as f:
                f.write(text.replace(json.loads(text)["commit"], "0ther"))
            mixed = self.study(out)
            self.assertEqual(mixed.returncode, 0, mixed.stderr)
            self.assertIn("a: from an earlier start (commit 0ther)", mixed.stdout)
            self.assertIn("warning: points from other sources", mixed.stdout)
            self.assertIn("0ther/", mixed.stdout)

    def test_a_point_beside_other_work_is_named_and_run_again(self):
        """A point whose report says its machine spent more than 0.5 CPUs on other work beside
        it (report.json's cluster.other_cpus_max, written here by the point itself) is named
        when it ends and at the end, and the next start runs it again; a quiet point and one
        given no report are reused. POINTS_MAX_OTHER_CPUS moves the limit."""
        with tempfile.TemporaryDirectory() as out:
            script = """set -euo pipefail
source %s/lib/points.sh
points_begin %s 3 demo
report() { mkdir -p %s/$1; echo "{\\"cluster\\": {\\"other_cpus_max\\": $2}}" > %s/$1/report.json; echo $1 >> %s/ran; }
point quiet 10 %s/quiet/report.json -- report quiet 0.12
point busy 10 %s/busy/report.json -- report busy 0.93
point none 10 -- report none 0.99
points_end
""" % (STUDIES, out, out, out, out, out, out)
            first = sh(script)
            self.assertEqual(first.returncode, 0, first.stderr)
            self.assertIn("busy: ok in", first.stdout)
            self.assertIn("beside 0.93 CPUs of other work", first.stdout)
            self.assertIn("warning: 1 point(s) ran beside more than 0.5 CPUs of other work: "
                          "busy (0.93)", first.stdout)
            with open(os.path.join(out, "points", "quiet.json")) as f:
                self.assertEqual(json.load(f)["other_cpus"], 0.12)
            with open(os.path.join(out, "points", "none.json")) as f:
                self.assertIsNone(json.load(f)["other_cpus"])
            again = sh(script)
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn("quiet: from an earlier start", again.stdout)
            self.assertIn("none: from an earlier start", again.stdout)
            self.assertIn("busy ran beside 0.93 CPUs of other work before: running it again",
                          again.stdout)
            with open(os.path.join(out, "ran")) as f:
                self.assertEqual(f.read().split(), ["quiet", "busy", "none", "busy"])
            lenient = sh(script, env={"POINTS_MAX_OTHER_CPUS": "1"})
            self.assertEqual(lenient.returncode, 0, lenient.stderr)
            self.assertEqual(lenient.stdout.count("from an earlier start"), 3)
            self.assertNotIn("warning", lenient.stdout)

    def test_the_time_left_is_scaled_by_the_points_already_timed(self):
        # a and b took 600 s each against estimates of 10 s (as their records say): with c
        # still to run, the time left is c's 10 s scaled by 1200/20: 10 min, not 10 s.
        with tempfile.TemporaryDirectory() as out:
            first = self.study(out)
            self.assertEqual(first.returncode, 0, first.stderr)
            self.assertIn("[1/3] a: ok in", first.stdout)
            for name in "ab":
                record = os.path.join(out, "points", name + ".json")
                with open(record) as f:
                    data = json.load(f)
                data["seconds"] = 600
                with open(record, "w") as f:
                    f.write(json.dumps(data) + "\n")
            again = self.study(out, arg="two")
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn("[1/3] a: from an earlier start", again.stdout)
            self.assertIn("2 left, about 20 min", again.stdout)  # 20 s left x 600/10 (a)
            self.assertIn("[2/3] b: from an earlier start", again.stdout)
            self.assertIn("1 left, about 10 min", again.stdout)

    def test_a_rebuild_during_a_study_shows_in_each_points_record(self):
        # Point b rebuilds the binaries (as a build beside a long study would): a's record
        # names the binaries it ran, b's and c's the new ones, and the study says so.
        with tempfile.TemporaryDirectory() as out:
            bins = os.path.join(out, "bin")
            os.makedirs(bins)
            for name in ("ps", "worker", "chief"):
                with open(os.path.join(bins, name), "w") as f:
                    f.write("old " + name)
            run = sh("""set -euo pipefail
source %s/lib/points.sh
points_begin %s 3 demo
point a 10 -- true
point b 10 -- bash -c 'echo new > %s/worker'
point c 10 -- true
points_end
""" % (STUDIES, out, bins), env={"BIN_DIR": bins})
            self.assertEqual(run.returncode, 0, run.stderr)
            hashes = {}
            for name in "abc":
                with open(os.path.join(out, "points", name + ".json")) as f:
                    hashes[name] = json.load(f)["binaries"]
            self.assertEqual(hashes["a"], hashes["b"])
            self.assertNotEqual(hashes["b"], hashes["c"])
            self.assertIn("the binaries changed during the study (%s, now %s)" %
                          (hashes["b"], hashes["c"]), run.stdout)
            self.assertIn("warning: points from other sources", run.stdout)

    def test_another_spelling_of_the_same_folders_is_the_same_settings(self):
        """A point's words name the study's folder and the binaries' folder; started again with
        another spelling of them (relative, through a link) the point is reused, and a record
        written before the placeholders (the hash of the words as given) is reused and takes
        today's hash. Another folder outside them, or another argument, still reruns."""
        with tempfile.TemporaryDirectory() as top:
            real = os.path.join(top, "real")
            os.makedirs(os.path.join(real, "out"))
            os.makedirs(os.path.join(real, "bin"))
            os.symlink(real, os.path.join(top, "link"))

            def study(out, bins, cwd, other="/srv/data", extra="1"):
                return subprocess.run(["bash", "-c", """set -euo pipefail
source %s/lib/points.sh
points_begin "$1" 2 demo
point a 10 -- bash -c 'echo a >> "$1"/ran' _ "$1" --log_dir="$1/runs/a" --bin="$BIN_DIR/worker" \
  --files="$1/x,$1/y" --data="$3"
point b 10 -- bash -c 'echo b >> "$1"/ran' _ "$1" --steps="$2"
points_end
""" % STUDIES, "_", out, extra, other], capture_output=True, text=True, timeout=60,
                    cwd=cwd, env=dict(os.environ, BIN_DIR=bins))

            def ran():
                with open(os.path.join(real, "out", "ran")) as f:
                    return f.read().split()

            first = study(os.path.join(real, "out"), os.path.join(real, "bin"), top)
            self.assertEqual(first.returncode, 0, first.stderr)
            self.assertEqual(ran(), ["a", "b"])
            # Relative from the top, and through the link: both points reused.
            for out, bins in (("real/out", "real/bin"),
                              (os.path.join(top, "link", "out"), "link/bin")):
                again = study(out, bins, top)
                self.assertEqual(again.returncode, 0, again.stderr)
                self.assertEqual(again.stdout.count("from an earlier start"), 2, again.stdout)
            self.assertEqual(ran(), ["a", "b"])
            # Another data folder (not the study's) and another argument: both rerun.
            changed = study("real/out", "real/bin", top, other="/srv/other", extra="2")
            self.assertEqual(changed.returncode, 0, changed.stderr)
            self.assertEqual(changed.stdout.count("ran before with other settings"), 2)
            self.assertEqual(ran(), ["a", "b", "a", "b"])
            # A record of the words as given (as written before the placeholders): reused,
            # and rewritten with today's hash.
            out = os.path.join(real, "out")
            words = ["bash", "-c", 'echo b >> "$1"/ran', "_", out, "--steps=3"]
            given = hashlib.sha256(("\n".join(words) + "\n").encode()).hexdigest()[:12]
            record = os.path.join(out, "points", "b.json")
            with open(record) as f:
                data = json.load(f)
            data["settings"] = given
            with open(record, "w") as f:
                f.write(json.dumps(data) + "\n")
            old = study(out, os.path.join(real, "bin"), top, other="/srv/other", extra="3")
            self.assertEqual(old.returncode, 0, old.stderr)
            self.assertIn("[2/2] b: from an earlier start", old.stdout)
            with open(record) as f:
                self.assertNotEqual(json.load(f)["settings"], given)
            relative = study("real/out", "real/bin", top, other="/srv/other", extra="3")
            self.assertIn("[2/2] b: from an earlier start", relative.stdout)
            self.assertEqual(ran(), ["a", "b", "a", "b"])


def grpc_row(benchmark, mode, payload, size, **more):
    row = {"benchmark": benchmark, "mode": mode, "payload": payload, "message_bytes": size,
           "buffers": 1, "window": 0, "servers": 1, "clients": 1, "p50_us": 10.0,
           "p95_us": 12.0, "p99_us": 20.0, "mb_per_s": 100.0, "calls_per_s": 1000.0,
           "rounds": 3, "ratios": {}}
    row.update(more)
    return row


class LuTablesTest(unittest.TestCase):
    def test_grpc_rows_and_payload_buckets(self):
        import tables_lu
        with tempfile.TemporaryDirectory() as d:
            for link in ("lo", "10gbit", "1gbit"):
                rows = [grpc_row("latency", "tcp", "32 B", 32),
                        grpc_row("latency", "serialized", "32 B", 32,
                                 ratios={"time_vs_tcp": {"median": 2.0, "min": 1.5, "max": 3.0}}),
                        grpc_row("ps_throughput", "bytebuffer", "skew", 4096, servers=2,
                                 clients=2)]
                with open(os.path.join(d, "grpc_%s.json" % link), "w") as f:
                    json.dump({"meta": {"date": "2026-11-29T00:00:00Z"}, "rows": rows}, f)
            worker = os.path.join(d, "payload", "logreg", "worker-0")
            os.makedirs(worker)
            upper = [64.0 * 2 ** i for i in range(21)] + [None]
            sent = [0] * 22
            sent[9] = 5  # 16-32 KiB
            with open(os.path.join(worker, "summary.json"), "w") as f:
                json.dump({"rpc_traffic": [
                    {"peer": "ps-0", "sent_size_histogram": {"upper": upper, "counts": sent},
                     "received_size_histogram": {"upper": upper, "counts": sent}},
                    {"peer": "chief-0", "sent_size_histogram": {"upper": upper, "counts": [9] * 22},
                     "received_size_histogram": {"upper": upper, "counts": [9] * 22}}]}, f)
            with open(os.path.join(d, "payload", "logreg", "report.json"), "w") as f:
                json.dump({"placement_table": [{"bytes": 31360}, {"bytes": 40}]}, f)
            tables_lu.lu(d, d)
            with open(os.path.join(d, "lu_grpc.csv")) as f:
                grpc = list(csv.DictReader(f))
            with open(os.path.join(d, "lu_payload.csv")) as f:
                payload = list(csv.DictReader(f))
            self.assertTrue(os.path.exists(os.path.join(d, "lu_grpc.svg")))
            self.assertTrue(os.path.exists(os.path.join(d, "lu_payload.svg")))
        self.assertEqual([r["link"] for r in grpc][::3], ["lo", "1gbit", "10gbit"])
        serialized = [r for r in grpc if r["mode"] == "serialized"][0]
        self.assertEqual((serialized["vs_tcp_median"], serialized["vs_tcp_min"]), ("2.0", "1.5"))
        # Only RPCs to ps tasks count (the chief's heartbeats do not); the variables beside.
        self.assertEqual([(r["bucket"], r["requests_sent"], r["variables"]) for r in payload],
                         [("0 B-64 B", "0", "1"), ("16 KiB-32 KiB", "5", "1")])


def cs744_report(seconds, rss):
    return {"time_to_target_accuracy_seconds": seconds, "global_step": 1000,
            "final_test_accuracy": 0.8, "workers_examples_per_sec": 1000.0,
            "train_seconds": seconds, "cluster": {"cpu_percent_mean": 150.0,
                                                  "peak_rss_bytes": 2 * rss},
            "tasks": [{"task": "ps-0", "job_execution_seconds": 10.0, "cpu_percent_max": 90.0},
                      {"task": "worker-1", "job_execution_seconds": 10.0,
                       "cpu_percent_max": 120.0}],
            "hosts": [{"host": "h1", "tasks": ["ps-0"], "cpu_percent_mean": 50.0,
                       "peak_rss_bytes": rss, "external_bytes_received": 20e6,
                       "external_bytes_sent": 10e6,
                       "interfaces": [{"loopback": True, "rx_packets": 999, "tx_packets": 999},
                                      {"loopback": False, "rx_packets": 100,
                                       "tx_packets": 50}]},
                      {"host": "h2", "tasks": ["worker-1"], "cpu_percent_mean": 70.0,
                       "peak_rss_bytes": rss, "external_bytes_received": 10e6,
                       "external_bytes_sent": 20e6,
                       "interfaces": [{"loopback": False, "rx_packets": 300,
                                       "tx_packets": 150}]}]}


class Cs744TablesTest(unittest.TestCase):
    def test_repeats_become_median_and_spread_with_per_node_figures(self):
        import tables_cs744
        with tempfile.TemporaryDirectory() as d:
            for r, seconds in ((1, 2.0), (2, 4.0), (3, 3.0)):
                run = os.path.join(d, "runs", "t34_cluster_async_tta_r%d" % r)
                os.makedirs(run)
                with open(os.path.join(run, "report.json"), "w") as f:
                    json.dump(cs744_report(seconds, 100e6), f)
            run = os.path.join(d, "runs", "f610_cluster2_sync_b64_r1")
            os.makedirs(run)
            with open(os.path.join(run, "report.json"), "w") as f:
                json.dump(cs744_report(5.0, 50e6), f)
            os.makedirs(os.path.join(d, "runs", "t34_cluster_sync_tta_r1"))  # no report: none
            tables_cs744.cs744(d, d)
            with open(os.path.join(d, "cs744_tables34.csv")) as f:
                t34 = list(csv.DictReader(f))
            with open(os.path.join(d, "cs744_figs6_10.csv")) as f:
                f610 = list(csv.DictReader(f))
        self.assertEqual(len(t34), 1)
        row = t34[0]
        self.assertEqual((row["setup"], row["mode"], row["run"], row["repeats"]),
                         ("cluster", "async", "tta", "3"))
        self.assertEqual((row["time_to_target_accuracy_seconds"],
                          row["time_to_target_accuracy_seconds_min"],
                          row["time_to_target_accuracy_seconds_max"]), ("3.0", "2.0", "4.0"))
        self.assertEqual(float(row["node_cpu_percent"]), 60.0)
        self.assertEqual(float(row["node_peak_rss_mb"]), 100.0)
        self.assertEqual(float(row["node_rx_mb_per_s"]), 1.5)  # (2 + 1) MB/s over 2 hosts
        self.assertEqual(float(row["node_rx_packets_per_s"]), 20.0)  # external only
        self.assertEqual(float(row["max_cpu_percent_of_a_task"]), 120.0)
        self.assertEqual((f610[0]["setup"], f610[0]["batch_size"]), ("cluster2", "64"))


class InGraphTablesTest(unittest.TestCase):
    def test_replicas_against_one_device_per_batch(self):
        with tempfile.TemporaryDirectory() as d:
            for name, rate in (("replicas_b100_r1", 210.0), ("replicas_b100_r2", 190.0),
                               ("one_device_b100_r1", 100.0), ("one_device_b100_r2", 100.0)):
                os.makedirs(os.path.join(d, "runs", name))
                with open(os.path.join(d, "runs", name, "summary.json"), "w") as f:
                    json.dump({"examples_per_sec": rate}, f)
            r = subprocess.run(["/usr/bin/python3", os.path.join(STUDIES, "tables.py"),
                                "in_graph", d, d], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(d, "in_graph.csv")) as f:
                rows = {row["how"]: row for row in csv.DictReader(f)}
        self.assertEqual(float(rows["replicas"]["examples_per_sec"]), 200.0)
        self.assertEqual((rows["replicas"]["examples_per_sec_min"],
                          rows["replicas"]["examples_per_sec_max"]), ("190.0", "210.0"))
        self.assertEqual(float(rows["replicas"]["vs_one_device"]), 2.0)
        self.assertEqual(rows["one_device"]["sources"], "unknown/unknown")


class BadInputTest(unittest.TestCase):
    """Every study's bad input exits 2 naming it, before anything runs."""

    def test_each_study_names_its_bad_input(self):
        cases = [("lu-osu/run.sh --links=2gb", "--links: '2gb'"),
                 ("lu-osu/run.sh --models=nosuch", "unknown model 'nosuch'"),
                 ("cs744/run.sh --parts=figs", "unknown part 'figs'"),
                 ("cs744/run.sh --repeats=0", "--repeats=0"),
                 ("cs744/run.sh --batch_sizes=64,x", "--batch_sizes=64,x"),
                 ("touchstone/run.sh --models=nosuch", "unknown model 'nosuch'"),
                 ("wang-et-al/in_graph.sh --steps=20", "leaves out the first 20"),
                 ("hkust/run.sh --parts=vgg", "--parts=vgg"),
                 ("wang-et-al/run.sh --flag", "unknown argument '--flag'"),
                 ("wang-et-al/run.sh --synthetic_examples=0", "--synthetic_examples=0"),
                 ("wang-et-al/run.sh --batch_sizes=100,400 --workers=1,8",
                  "needs --synthetic_examples=3200 or more"),
                 ("wang-et-al/ratio.sh --parts=main,knee", "unknown part 'knee'"),
                 ("run_all.sh --nodes=n1,n2", "unknown argument '--nodes=n1,n2'"),
                 ("run_all.sh --without=alexnet,vgg", "--without: unknown name 'vgg'")]
        for args, text in cases:
            with tempfile.TemporaryDirectory() as out:
                r = sh("%s/%s --out=%s" % (STUDIES, args, out))
                self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
                self.assertIn(text, r.stderr, args)
                self.assertFalse(os.path.exists(os.path.join(out, "points")), args)

    def test_run_all_counts_only_what_it_runs(self):
        """run_all.sh --without: leaving out CS744 leaves out its AlexNet part too, and the time
        announced is the sum of what is left (nothing here, so nothing runs and no log is made);
        leaving out AlexNet keeps CS744's other parts at their 5 min."""
        everything = "touchstone,lu-osu,hkust,cs744,wang-et-al,wang-ratio,wang-in-graph"
        with tempfile.TemporaryDirectory() as out:
            r = sh("%s/run_all.sh --out=%s --without=%s" % (STUDIES, out, everything))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("about 0 h 0 min on the 2-core VM", r.stdout)
            self.assertIn("run_all: done", r.stdout)
            self.assertEqual(os.listdir(out), [])
        with tempfile.TemporaryDirectory() as out:
            # CS744 alone without AlexNet: 5 min announced; it stops at once here (no
            # binaries in BIN_DIR), and run_all names its log.
            rest = everything.replace("cs744,", "")
            r = sh("%s/run_all.sh --out=%s --without=%s,alexnet" % (STUDIES, out, rest),
                   env={"BIN_DIR": out})
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("about 0 h 5 min on the 2-core VM", r.stdout)
            self.assertIn("run_all: cs744, about 5 min", r.stdout)
            self.assertIn("cs744 failed (exit 2): see %s/cs744.log" % out, r.stderr)

    def test_an_unreachable_ratio_names_the_highest_possible(self):
        r = sh("%s/scripts/netns_hosts.sh up 10 --rate 1gbit --host_examples_per_sec 427 "
               "--examples_per_cpu 400 --check" % ROOT)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("427 examples/s per host beside a 1gbit link", r.stderr)
        cores = os.cpu_count()
        self.assertIn("the highest ratio possible is %.1f examples/s" % (cores / 10 * 400),
                      r.stderr)
        scale = math.ceil(10 * 427 / 400 / cores) + 1
        ok = sh("%s/scripts/netns_hosts.sh up 10 --rate 1gbit --host_examples_per_sec 427 "
                "--examples_per_cpu 400 --scale %d --check" % (ROOT, scale))
        self.assertEqual(ok.returncode, 0, ok.stderr)


if __name__ == "__main__":
    unittest.main()
