#!/usr/bin/python3
"""The report renderer (scripts/fulcrum_report): run pages and sweep pages.

One self-contained page per report with a chart per view and the tables; every string from a
report escaped; nothing fetched from anywhere; no report (empty, wrongly typed, absurd) makes
it raise. bench/sweep.py's index.html comes from the same renderer.

  /usr/bin/python3 tests/chief/report_render_test.py [FIXTURE_OUT.json]
With an argument it only writes the fixture report (the C++ test and manual checks use it).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import fulcrum_report  # noqa: E402


def samples(t0, cpu, rss, eth0):
    return {"unix_s": [t0, t0 + 0.5, t0 + 1.0],
            "cpu_percent": [0.0, cpu, cpu / 2],
            "rss_bytes": [1e7, rss, rss],
            "network": {
                "lo": {"rx_bytes_per_sec": [0, 2e6, 1e6], "tx_bytes_per_sec": [0, 2e6, 1e6]},
                "eth0": {"rx_bytes_per_sec": [0, eth0, eth0], "tx_bytes_per_sec": [0, eth0, 0]},
                "docker0": {"rx_bytes_per_sec": [0, 0, 0], "tx_bytes_per_sec": [0, 0, 0]}}}


def worker(index, host, t0):
    return {"job": "worker", "task_index": index, "host": host,
            "series": {"steps": {"unix_s": [t0 + 0.2, t0 + 0.6, t0 + 1.0],
                                 "examples_per_sec": [1000.0, 1200.0, 1100.0],
                                 "loss": [2.0, 1.0, 0.5], "global_step": [10, 20, 30]},
                       "samples": samples(t0, 90, 2e8, 5e5)},
            "peer_traffic": [
                {"peer": "ps-0", "rpcs": 40, "bytes_sent": 12.3e6, "bytes_received": 4e6},
                {"peer": "chief-0", "rpcs": 2, "bytes_sent": 300, "bytes_received": 90}],
            "step_phase_mean_ms": {"data": 0.1, "pull": 0.4, "forward": 1.0, "backward": 2.0,
                                   "push": 0.5, "sync_wait": 0.2},
            "step_time_p50_ms": 4.1, "step_time_p99_ms": 9.5,
            "System Information": {"Processor": "AMD EPYC", "Machine": "x86_64"}}


def task_row(name, host, rss):
    return {"task": name, "host": host, "cpu_percent_mean": 42.34, "peak_rss_bytes": rss,
            "app_bytes_sent": 1, "examples_per_sec": 153234.0}


def report():
    """chief-0, ps-0 and worker-0 on node1, worker-1 on node2, shaped as the chief writes it."""
    return {
        "run_id": "logreg-20261123", "model": "logreg", "dataset": "mnist", "mode": "sync",
        "num_ps": 1, "num_workers": 2, "learning_rate": 0.029999999329447746,
        "final_test_accuracy": 0.8123, "time_to_target_accuracy_seconds": None,
        "train_seconds": 12.3456, "global_step": 1000, "stop_reason": "reached train_steps 1000 <&>",
        "evals": [{"global_step": 500, "seconds": 6.0, "test_accuracy": 0.7, "test_loss": 0.9},
                  {"global_step": 1000, "seconds": 12.0, "test_accuracy": 0.81, "test_loss": 0.6}],
        "workers": [worker(0, "node1", 1000.3), worker(1, "node2", 1000.1)],
        "ps": [{"job": "ps", "task_index": 0, "host": "node1",
                "series": {"samples": samples(1000.0, 30, 5e7, 5e5)}}],
        "chief": {"job": "chief", "task_index": 0, "host": "node1",
                  "series": {"samples": samples(1000.2, 5, 3e7, 0)}},
        "tasks": [task_row("chief-0", "node1", 3e7), task_row("ps-0", "node1", 5e7),
                  task_row("worker-0", "node1", 12.3e6), task_row("worker-1", "node2", 2e8)],
        "hosts": [{"host": "node1", "tasks": ["chief-0", "ps-0", "worker-0"],
                   "interfaces_from": "ps-0",
                   "interfaces": [{"name": "eth0", "rx_bytes": 2e6, "tx_bytes": 3e6}]}],
        "cluster": {"tasks": 4, "hosts": 2, "external_bytes_sent": 1.5e9},
        "placement_table": [{"variable": "dense/kernel", "ps": 0, "bytes": 31360}],
        "traffic": [
            {"from": "worker-0", "to": "ps-0", "kind": "training",
             "bytes_counted_by_sender": 12.3e6, "bytes_counted_by_receiver": 4e6},
            {"from": "worker-1", "to": "chief-0", "kind": "control",
             "bytes_counted_by_sender": 300, "bytes_counted_by_receiver": None}],
    }


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def chart(html, title):
    """The <svg>...</svg> whose <title> starts with title, or ""."""
    at = html.find("<title>" + title)
    if at < 0:
        return ""
    begin, end = html.rfind("<svg", 0, at), html.find("</svg>", at)
    return "" if end < 0 else html[begin:end + 6]


def assert_self_contained(test, html, run_links=False):
    # The only URLs are XML namespace names; nothing is loaded from anywhere. A sweep page
    # (run_links) links each run's own report, a relative path inside the sweep's folder.
    if run_links:
        html = re.sub(r'<a href="runs/[^":]*/run/(report\.html|summary\.json)">', "<a>", html)
    urls = re.findall(r'[a-z:]*="?https?://[^"\s]*', html)
    for u in urls:
        test.assertRegex(u, r'^xmlns(:xlink)?="http://www\.w3\.org/', u)
    test.assertLacks("https://", html)
    test.assertIsNone(re.search(r"<[a-zA-Z][^<>]*\s(src|href|data)\s*=\s*[\"']?[^#\"']", html))
    test.assertLacks("<script", html)
    test.assertLacks("<link", html)
    for ref in re.findall(r'href="([^"]*)"', html):
        test.assertTrue(ref.startswith("#"), ref)  # references inside the same SVG
    for ref in re.findall(r"url\(([^)]*)\)", html):
        test.assertTrue(ref.startswith("#"), ref)


class Test(unittest.TestCase):
    """assertIn/assertNotIn that name the needle, not the whole page, when they fail."""

    def assertHas(self, needle, haystack):
        self.assertTrue(needle in haystack, "%r not found" % needle)

    def assertLacks(self, needle, haystack):
        at = haystack.find(needle)
        self.assertTrue(at < 0, "%r found: ...%s..." % (needle, haystack[max(0, at - 80):at + 80]))


class RunPageTest(Test):
    def test_one_page_with_every_chart_and_table(self):
        html = fulcrum_report.render_run_page(report())
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        self.assertHas("</html>", html)
        # Throughput, loss, evaluations, phases, CPU, memory, a network chart per host, peers.
        self.assertEqual(html.count("<svg"), 9)
        self.assertEqual(html.count("</svg>"), 9)
        for title in ("Examples/s per worker", "Training loss per worker",
                      "Chief&#39;s evaluations", "Process CPU per task",
                      "Resident memory (RSS) per task", "Application bytes",
                      "Mean step time of each worker by phase",
                      "Network of host node1 (as seen by ps-0)",
                      "Network of host node2 (as seen by worker-1)"):
            self.assertNotEqual(chart(html, title), "", title)
        for text in ("chief-0", "ps-0", "worker-0", "worker-1", "node1", "node2",
                     "dense/kernel", "logreg-20261123", "mnist", "0.8123"):
            self.assertHas(text, html)
        assert_self_contained(self, html)
        # Chart ids are unique on the page (one SVG's clip paths never hide another's lines).
        ids = re.findall(r' id="([^"]*)"', html)
        self.assertEqual(len(ids), len(set(ids)))

    def test_a_failed_or_interrupted_run_gets_a_red_banner_first(self):
        self.assertLacks('class="banner"', fulcrum_report.render_run_page(report()))
        failed = report()
        failed["failed"] = True
        failed["stop_reason"] = "ps:0 is unreachable <&>"
        html = fulcrum_report.render_run_page(failed)
        self.assertHas('<div class="banner">This run FAILED: ps:0 is unreachable &lt;&amp;&gt;',
                       html)
        self.assertLess(html.find('class="banner"'), html.find("<h1>"))
        interrupted = report()
        interrupted["stop_reason"] = "interrupted by SIGINT"
        self.assertHas('<div class="banner">This run was interrupted by SIGINT',
                       fulcrum_report.render_run_page(interrupted))

    def test_distributions_of_step_times_and_message_sizes(self):
        r = report()
        upper = [0.25 * 2 ** i for i in range(15)] + [None]
        r["workers"][0]["step_time_histogram_ms"] = {"upper": upper, "counts": [0] * 5 + [7, 3] + [0] * 9}
        r["workers"][1]["step_time_histogram_ms"] = {"upper": upper, "counts": [0] * 6 + [8] + [0] * 9}
        sizes = [64.0 * 2 ** i for i in range(21)] + [None]
        r["workers"][0]["rpc_traffic"] = [
            {"peer": "ps-0", "method": "PushPull",
             "sent_size_histogram": {"upper": sizes, "counts": [0] * 15 + [10] + [0] * 6}},
            {"peer": "chief-0", "method": "Heartbeat",
             "sent_size_histogram": {"upper": sizes, "counts": [2] + [0] * 21}}]
        html = fulcrum_report.render_run_page(r)
        times = chart(html, "Step times of each worker")
        self.assertHas("4 ms to 8 ms", times)
        self.assertHas("8 ms to 16 ms", times)
        self.assertHas(">11<", times)  # 3 + 8 steps in [8, 16) ms
        self.assertHas(">worker-0<", times)
        sizes_chart = chart(html, "Message sizes")
        self.assertHas("&lt; 64 B", sizes_chart)
        self.assertHas("1.0 MB to 2.1 MB", sizes_chart)
        self.assertHas(">PushPull<", sizes_chart)
        self.assertHas(">Heartbeat<", sizes_chart)
        assert_self_contained(self, html)
        # Without the histograms (an older or unprofiled run): no data, no error.
        self.assertHas("Step times: no data", fulcrum_report.render_run_page(report()))

    def test_a_balance_card_puts_the_ps_tasks_side_by_side(self):
        self.assertLacks("<h2>Balance</h2>", fulcrum_report.render_run_page(report()))  # 1 ps
        r = report()
        # report.json's balance rows, as AddClusterTables writes them (tests/chief/report_test.cc).
        r["balance"] = [{"task": "ps-0", "index": 0, "bytes": 3e9, "cpu_seconds": 3.0,
                         "applies": 500, "bytes_share": 0.75, "cpu_seconds_share": 0.75,
                         "applies_share": 0.5},
                        {"task": "ps-1", "index": 1, "bytes": 1e9, "cpu_seconds": 1.0,
                         "applies": 500, "bytes_share": 0.25, "cpu_seconds_share": 0.25,
                         "applies_share": 0.5}]
        html = fulcrum_report.render_run_page(r)
        self.assertHas("<h2>Balance</h2>", html)
        self.assertHas("<td>ps-0</td><td>75%</td><td>75%</td><td>50%</td>", html)
        self.assertHas("<td>ps-1</td><td>25%</td><td>25%</td><td>50%</td>", html)

    def test_bytes_at_three_layers_per_host_path_and_direction(self):
        self.assertLacks("three layers", fulcrum_report.render_run_page(report()))  # no layers
        r = report()
        # A host row's layers, as chief/layers.cc writes them (tests/chief/report_test.cc).
        sent = {"app_bytes": 2e9, "tcp_bytes": 2.01e9, "protocol_overhead": 0.005,
                "interface_bytes": 2.02e9, "interface_packets": 1e5,
                "header_bytes_per_packet": 66.0, "interface_payload_bytes": 2.0133e9,
                "interface_vs_tcp": 0.0017}
        idle = dict(sent, tcp_bytes=0.0)
        r["hosts"][0]["layers"] = {
            "external": {"sent": sent, "received": idle, "retransmits": 12, "connections": 3},
            "loopback": {"sent": idle, "received": idle, "retransmits": 0, "connections": 0}}
        html = fulcrum_report.render_run_page(r)
        self.assertHas("<h2>Bytes at three layers</h2>", html)
        self.assertHas("<td>external</td><td>sent</td><td>2.0 GB</td><td>2.0 GB</td>"
                       "<td>+0.50%</td><td>2.0 GB</td><td>+0.17%</td><td>12</td>", html)
        self.assertLacks("<td>loopback</td><td>sent</td>", html)  # TCP carried nothing there

    def test_what_if_lists_each_change_the_skipped_ones_and_the_best(self):
        self.assertLacks("<h2>What-if</h2>", fulcrum_report.render_run_page(report()))
        r = report()
        # As chief/whatif.cc writes it (tests/chief/whatif_test.cc).
        r["whatif"] = {"run": {"step_ms": 20.0, "compute_ms": 6.0},
                       "scenarios": [{"name": "link_2x", "change": "links at twice the rate",
                                      "examples_per_sec": 15384.6, "step_time_ms": 13.0,
                                      "speedup": 1.538},
                                     {"name": "workers_2x", "change": "--workers 4",
                                      "examples_per_sec": 11764.7, "step_time_ms": 34.0,
                                      "speedup": 1.176}],
                       "skipped": [{"name": "one_more_ps", "why": "leaves ps:2 empty"}],
                       "most_useful": "link_2x"}
        html = fulcrum_report.render_run_page(r)
        self.assertHas("<h2>What-if</h2>", html)
        self.assertHas("<td>links at twice the rate (most useful)</td><td>15.4k</td>"
                       "<td>13 ms</td><td>1.54\u00d7</td>", html)
        self.assertHas("<td>one_more_ps</td><td>not predicted: leaves ps:2 empty</td>", html)
        r["whatif"] = {"error": "what-if needs ps tasks"}
        self.assertHas("No predictions: what-if needs ps tasks",
                       fulcrum_report.render_run_page(r))

    def test_legends_and_ticks_carry_names_and_units(self):
        html = fulcrum_report.render_run_page(report())
        rate = chart(html, "Examples/s per worker")
        self.assertHas(">worker-0<", rate)
        self.assertHas(">worker-1<", rate)
        self.assertHas(">examples/s<", rate)
        self.assertHas(">1000<", rate)  # y ticks in examples/s
        self.assertHas("time since start (s)", rate)
        mem = chart(html, "Resident memory (RSS) per task")
        for name in ("chief-0", "ps-0", "worker-0", "worker-1"):
            self.assertHas(">%s<" % name, mem)
        self.assertHas(">200 MB<", mem)
        self.assertRegex(chart(html, "Process CPU per task"), r">\d+%<")
        evals = chart(html, "Chief&#39;s evaluations")
        self.assertHas(">test accuracy<", evals)
        self.assertHas(">test loss<", evals)

    def test_a_network_chart_per_host_with_rx_and_tx_apart(self):
        html = fulcrum_report.render_run_page(report())
        for title in ("Network of host node1 (as seen by ps-0)",
                      "Network of host node2 (as seen by worker-1)"):
            c = chart(html, title)
            self.assertLacks("lo (loopback) rx", c)  # rx = tx on lo: one line
            for text in ("lo (loopback, rx = tx)", "eth0 (external) rx",
                         "eth0 (external) tx", "idle: docker0", "MB/s<"):
                self.assertHas(text, c)
            self.assertEqual(c.count("stroke-dasharray"), c.count("stroke-dasharray") // 2 * 2)
        self.assertLacks("Network of host node1 (as seen by chief-0)", html)

    def test_bars_for_peers_and_phases(self):
        html = fulcrum_report.render_run_page(report())
        peers = chart(html, "Application bytes")
        self.assertHas("worker-0 \u2192 ps-0 (training)", peers)
        self.assertHas("worker-1 \u2192 chief-0 (control)", peers)
        # One bar per transfer, its sender's count; both ends' counts only in the note (they
        # count the same bytes: stacked, the bar was twice as long).
        self.assertHas("sender 12.3 MB / receiver 4.0 MB", peers)
        self.assertHas("sender 300 B / receiver not counted", peers)
        self.assertLacks(">by sender<", peers)
        self.assertLacks(">by receiver<", peers)
        phases = chart(html, "Mean step time of each worker by phase")
        self.assertHas("4.2 ms (p50 4.1 ms, p99 9.5 ms)", phases)
        for phase in ("data", "pull", "forward", "backward", "push", "sync_wait"):
            self.assertHas(">%s<" % phase, phases)

    def test_tables_in_human_units(self):
        html = fulcrum_report.render_run_page(report())
        for text in ("<td>12.3 MB</td>", "<td>200.0 MB</td>", "<td>1.5 GB</td>", "<td>42.3%</td>",
                     "<td>153.2k</td>", "<td>12.35 s</td>", "<td>0.03</td>", "<td>31.4 KB</td>",
                     "<td>time_to_target_accuracy_seconds</td><td>n/a</td>",
                     "eth0 2.0 MB in / 3.0 MB out", "AMD EPYC"):
            self.assertHas(text, html)

    def test_placement_shows_each_variables_share_and_each_ps_total(self):
        r = report()
        r["placement_table"] = [{"variable": "conv/kernel", "ps": 0, "bytes": 750},
                                {"variable": "conv/bias", "ps": 1, "bytes": 250}]
        html = fulcrum_report.render_run_page(r)
        for text in ("<th>share</th>", "<td>conv/kernel</td><td>ps-0</td><td>750 B</td>"
                     "<td>75.00 %</td>", "<td>all variables</td><td>ps-1</td><td>250 B</td>"
                     "<td>25.00 %</td>"):
            self.assertHas(text, html)

    def test_escapes_strings(self):
        r = report()
        r["tasks"][3]["task"] = "<script>alert(1)</script>"
        r["workers"][1]["job"] = "<img src=x onerror=alert(1)>$x$"
        r["workers"][1]["host"] = "a\"b'c"
        r["ps"][0]["job"] = 'ps id="p" url(#q)'
        html = fulcrum_report.render_run_page(r)
        # Text that looks like an SVG reference is left as it is (ids are renamed in tags only).
        self.assertHas('>ps id="p" url(#q)-0<', chart(html, "Process CPU per task"))
        self.assertLacks("<script", html)
        self.assertLacks("<img", html)
        self.assertHas("&lt;script&gt;alert(1)&lt;/script&gt;", html)
        self.assertHas("&lt;img src=x onerror=alert(1)&gt;$x$-1", html)  # in a legend, as text
        self.assertHas("reached train_steps 1000 &lt;&amp;&gt;", html)
        self.assertHas("a&quot;b&#39;c", html)
        assert_self_contained(self, html)

    def test_empty_reports_render(self):
        for r in ({}, None, [], "text", 5):
            html = fulcrum_report.render_run_page(r)
            self.assertTrue(html.startswith("<!DOCTYPE html>"))
            self.assertHas("no data", html)  # the charts say so, not the fallback page
            self.assertLacks("could not be drawn", html)
            self.assertEqual(html.count("<svg"), 0)

    def test_wrongly_typed_and_absurd_reports_render(self):
        bad = report()
        bad["final_test_accuracy"] = "high"
        bad["evals"] = [{"global_step": 1e17, "test_accuracy": 0.5},
                        {"global_step": 1e17, "test_accuracy": 0.6}, "none"]
        bad["workers"][0]["series"] = None
        bad["workers"][1]["task_index"] = 1e300
        bad["workers"][1]["series"]["steps"]["loss"] = ["a", None, 3]
        bad["workers"][1]["series"]["steps"]["examples_per_sec"] = [1e308, -1e308, 0]
        bad["workers"][1]["series"]["samples"]["network"] = 5
        bad["ps"][0]["series"]["samples"]["network"]["lo"] = "x"
        bad["ps"][0]["peer_traffic"] = [{"peer": [1, 2], "bytes_sent": "many"}]
        bad["chief"]["series"]["samples"]["unix_s"] = ["now", 1000.3]
        bad["chief"]["step_phase_mean_ms"] = {"data": "slow"}
        bad["model"] = {"name": "\udcff"}
        bad["tasks"] = [1, "two", None, {"task": 3}]
        bad["hosts"] = [{"host": 7, "tasks": "all", "interfaces": [{"rx_bytes": "x"}]}]
        bad["cluster"] = {"tasks": "four"}
        bad["placement_table"] = [{"variable": None, "ps": [0]}]
        html = fulcrum_report.render_run_page(bad)
        self.assertEqual(html.count("<svg"), html.count("</svg>"))
        self.assertHas("Examples/s per worker", html)  # not the fallback page
        self.assertLacks("could not be drawn", html)
        self.assertHas("<td>final_test_accuracy</td><td>high</td>", html)
        self.assertHas("final test accuracy</span><b>n/a", html)
        self.assertLacks(">nan<", html)

    def test_command_line_writes_the_page_and_leaves_the_json(self):
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "report.json"), os.path.join(d, "report.html")
            with open(src, "w") as f:
                json.dump(report(), f)
            before = read(src)
            cli = os.path.join(ROOT, "scripts", "render_report.py")
            p = subprocess.run([sys.executable, cli, src, out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(read(out).count("<svg"), 9)
            self.assertEqual(read(src), before)
            self.assertEqual(sorted(os.listdir(d)), ["report.html", "report.json"])  # no .tmp
            p = subprocess.run([sys.executable, cli, os.path.join(d, "missing.json"), out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 1)
            self.assertHas("missing.json", p.stderr)
            p = subprocess.run([sys.executable, cli, src], capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)


def load_sweep_module():
    spec = importlib.util.spec_from_file_location("sweep", os.path.join(ROOT, "bench", "sweep.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SweepModesTest(Test):
    """bench/sweep.py's --modes entries and the flags each run gets (bench/sweep_flags.py)."""

    def test_ssp_modes_carry_their_staleness(self):
        load_sweep_module()  # puts bench/ on the path, as sweep.py runs
        import sweep_flags
        self.assertEqual(sweep_flags.mode_flags("sync"), ["--mode=sync"])
        self.assertEqual(sweep_flags.mode_flags("async"), ["--mode=async"])
        self.assertEqual(sweep_flags.mode_flags("ssp3"), ["--mode=ssp", "--staleness=3"])
        self.assertEqual(sweep_flags.mode_flags("ssp0"), ["--mode=ssp", "--staleness=0"])

    def test_the_emulated_hosts_reach_the_what_if(self):
        load_sweep_module()
        import sweep_flags
        args = type("Args", (), {"cpus": 0.5})()
        c = {"rate": "1gbit", "scale": 2.0}
        # At scale 1/2: half the rate, netns_hosts.sh's burst (1 ms at it, at least 64 KiB),
        # half the CPU share.
        self.assertEqual(sweep_flags.host_model_flags(c, args),
                         ["--link_rate=500000000", "--link_burst_bytes=65536",
                          "--host_cpus=0.25"])
        c = {"rate": "10gbit", "scale": 1.0}
        args.cpus = None
        self.assertEqual(sweep_flags.host_model_flags(c, args),
                         ["--link_rate=10000000000", "--link_burst_bytes=1250000"])
        self.assertEqual(sweep_flags.host_model_flags({"rate": "none", "scale": 1.0}, args), [])


class SweepCommandTest(Test):
    """bench/sweep.py as a user starts it: --help documents every option with its default;
    --dry_run lists the runs (and the skipped ones, with why) and an estimate, and runs
    nothing, without root or binaries."""

    def sweep(self, *args):
        return subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "sweep.py")] +
                              list(args), capture_output=True, text=True, timeout=60)

    def test_help_documents_every_option_with_its_default(self):
        out = self.sweep("--help")
        self.assertEqual(out.returncode, 0, out.stderr)
        text = " ".join(out.stdout.split())
        load_sweep_module()  # puts bench/ on the path, as sweep.py runs
        import sweep_options
        for name, default, _, _ in sweep_options.OPTIONS:
            self.assertHas(name, text)
            if name != "--out":
                self.assertHas("(default: %s)" % default, text)
        self.assertHas("--dry_run", text)

    def test_dry_run_lists_the_runs_and_an_estimate(self):
        with tempfile.TemporaryDirectory() as tmp:
            out_dir = os.path.join(tmp, "sw")
            out = self.sweep("--out=" + out_dir, "--layouts=ps-w-w,pw-w", "--workers=1,2",
                             "--modes=sync,async", "--repeats=2", "--timeout=100", "--dry_run")
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(sum(1 for x in lines if x.startswith("run  ")), 12)
            self.assertEqual(sum(1 for x in lines if x.startswith("skip ")), 2)
            self.assertHas("pw-w needs 2 or more workers", out.stdout)
            self.assertHas("12 run(s); no earlier runs", out.stdout)
            self.assertHas("at most 1200 s", out.stdout)
            self.assertFalse(os.path.exists(out_dir))  # nothing ran, nothing written
            # With an earlier sweep's runs.csv, the estimate is its median training time.
            os.makedirs(out_dir)
            with open(os.path.join(out_dir, "runs.csv"), "w") as f:
                f.write("status,train_seconds\nok,10\nok,30\nfailed,\nok,20\n")
            out = self.sweep("--out=" + out_dir, "--workers=2", "--dry_run")
            self.assertHas("2 run(s); about 56 s (28 s each: the median training time of 3",
                           out.stdout)

    def test_a_bad_axis_exits_two_before_anything(self):
        out = self.sweep("--out=/nonexistent/sw", "--modes=sometimes", "--dry_run")
        self.assertEqual(out.returncode, 2)
        self.assertHas("--modes=sometimes", out.stderr)


class SweepProvenanceTest(Test):
    """bench/sweep_provenance.py: a resumed sweep reuses a run only with the same settings,
    and names the sources behind every row."""

    def test_reuse_only_with_the_same_settings_and_name_other_sources(self):
        load_sweep_module()
        import sweep_provenance as pv
        flags = ["--model=logreg", "--batch_size=128", "--run_dir=/x/run"]
        settings = pv.settings_of(flags, {"rate": "1gbit", "share": []})
        self.assertEqual(settings["flags"], ["--model=logreg", "--batch_size=128"])
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(pv.reusable(d, settings), (True, ""))  # before the records
            self.assertEqual(pv.source_columns(d)["commit"], "unknown")
            # A failed run (which leaves a report too) is run again, whatever its settings.
            pv.write_record(d, {"commit": "abc123", "binaries": "b1"}, settings, 0, 2)
            self.assertEqual(pv.reusable(d, settings), (False, "failed before (exit code 2)"))
            pv.write_record(d, {"commit": "abc123", "binaries": "b1"}, settings, 0, 0)
            self.assertEqual(pv.reusable(d, settings), (True, ""))
            # Records from before exit codes were kept: the report says whether it failed.
            report = os.path.join(d, "report.json")
            with open(report, "w") as f:
                json.dump({"failed": True}, f)
            self.assertEqual(pv.reusable(d, settings, report),
                             (False, "failed before (its report says so)"))
            with open(report, "w") as f:
                f.write('{"failed": fal')  # cut short
            self.assertEqual(pv.reusable(d, settings, report), (False, "left no readable report"))
            with open(report, "w") as f:
                json.dump({"failed": False}, f)
            self.assertEqual(pv.reusable(d, settings, report), (True, ""))
            # The same flags with another run folder are the same settings.
            moved = pv.settings_of(flags[:2] + ["--run_dir=/y/run"],
                                   {"rate": "1gbit", "share": []})
            self.assertTrue(pv.reusable(d, moved)[0])
            other = pv.settings_of(["--model=logreg", "--batch_size=256"],
                                   {"rate": "1gbit", "share": []})
            same, why = pv.reusable(d, other)
            self.assertFalse(same)
            self.assertHas("ran with other settings", why)
            self.assertEqual(pv.source_columns(d), {"commit": "abc123", "binaries": "b1",
                                                    "settings_hash": pv.settings_hash(settings),
                                                    "other_cpus": None})
            # A run beside other work (its report.json's cluster.other_cpus_max, in run/): its
            # figure is a column, and it is reused unless a limit is given and it is over it.
            os.makedirs(os.path.join(d, "run"))
            with open(os.path.join(d, "run", "report.json"), "w") as f:
                json.dump({"cluster": {"other_cpus_max": 1.25}}, f)
            self.assertEqual(pv.source_columns(d)["other_cpus"], 1.25)
            self.assertEqual(pv.reusable(d, settings, report), (True, ""))
            self.assertEqual(pv.reusable(d, settings, report, 2.0), (True, ""))
            self.assertEqual(pv.reusable(d, settings, report, 0.5), (
                False, "ran beside 1.25 CPUs of other work (more than --max_other_cpus=0.5)"))
        runs = [{"status": "ok", "commit": "abc123", "binaries": "b1"},
                {"status": "ok", "commit": "def456", "binaries": "b2"},
                {"status": "failed", "commit": "zzz", "binaries": "b9"}]
        self.assertEqual(pv.distinct(runs[:2], "commit"), "abc123+def456")
        now = {"commit": "abc123", "binaries": "b1"}
        warning = pv.mixed_warning(runs, now)
        self.assertHas("1 source(s) other than this sweep's", warning)
        self.assertHas("commit def456 binaries b2", warning)
        self.assertLacks("zzz", warning)  # a failed run contributes no figures
        self.assertEqual(pv.mixed_warning(runs[:1], now), "")
        # results.csv's largest other work behind a point, and the warning naming busy runs.
        busy = [{"status": "ok", "other_cpus": 0.1, "run_dir": "runs/a_r1", "commit": "c"},
                {"status": "ok", "other_cpus": 0.9, "run_dir": "runs/a_r2", "commit": "c"},
                {"status": "ok", "other_cpus": None, "run_dir": "runs/a_r3", "commit": "c"},
                {"status": "failed", "other_cpus": 1.5, "run_dir": "runs/a_r4"}]
        self.assertEqual(pv.point_columns(busy[:3])["other_cpus_max"], 0.9)
        self.assertIsNone(pv.point_columns(busy[2:3])["other_cpus_max"])
        warning = pv.busy_warning(busy, 0.5)
        self.assertHas("1 run(s) ran beside more than 0.5 CPUs of other work", warning)
        self.assertHas("a_r2 (0.90)", warning)
        self.assertLacks("a_r4", warning)  # a failed run's figures are not used anyway
        self.assertEqual(pv.busy_warning(busy, 1.0), "")

    def test_summary_has_the_spread_and_the_commits(self):
        sweep = load_sweep_module()
        c = {"layout": "ps-w-w", "workers": 1, "ps": 1, "hosts": 2, "batch_size": 128,
             "mode": "sync", "rate": "none", "skip": None}
        rows = [dict(c, status="ok", examples_per_sec=v, train_seconds=10.0, commit=k,
                     binaries="b") for v, k in ((100.0, "a"), (140.0, "a"), (90.0, "b"))]
        (row,) = sweep.summarize([c], rows)
        self.assertEqual(row["examples_per_sec"], 100.0)
        self.assertEqual((row["examples_per_sec_min"], row["examples_per_sec_max"]),
                         (90.0, 140.0))
        self.assertEqual(row["commits"], "a+b")
        self.assertEqual(row["repeats_ok"], 3)


class SweepPageTest(Test):
    """bench/sweep.py's index.html and plots/, from results and the runs' own reports."""

    def test_index_and_plots_from_results_and_runs(self):
        sweep = load_sweep_module()
        combos, rows = [], []
        for layout in ("ps-w-w", "pw-w"):
            for w in (1, 2):
                c = {"layout": layout, "workers": w, "ps": 1, "hosts": 2, "batch_size": 128,
                     "mode": "sync", "rate": "1gbit", "skip": None}
                if layout == "pw-w" and w == 1:
                    c["skip"] = "pw-w needs 2 or more workers"
                combos.append(c)
        with tempfile.TemporaryDirectory() as d:
            for c in combos:
                if c["skip"]:
                    continue
                r = report()
                r["workers_examples_per_sec"] = 1000.0 * c["workers"]
                r["time_to_target_accuracy_seconds"] = 3.5
                r["cluster"].update(cpu_percent_mean=150.0, peak_rss_bytes=3e8,
                                    loopback_bytes_sent=2e6, external_bytes_sent=4e7)
                r["hosts"][0].update(loopback_bytes_sent=2e6, external_bytes_sent=3e7,
                                     external_bytes_received=1e7)
                r["tasks"][0]["task"] = "<b>chief</b>"
                run_dir = os.path.join(d, "runs", sweep.run_name(c, 1), "run")
                os.makedirs(run_dir)
                with open(os.path.join(run_dir, "report.json"), "w") as f:
                    json.dump(r, f)
                row = dict(c, repeat=1, status="ok", exit_code=0,
                           run_dir="runs/" + sweep.run_name(c, 1), **sweep.figures(r))
                rows.append(row)
            results = sweep.summarize(combos, rows)
            fields = list(results[0].keys())
            sweep.write_index(d, [{f: r.get(f) for f in fields} for r in results], rows)
            html = read(os.path.join(d, "index.html"))
            plots = sorted(os.listdir(os.path.join(d, "plots")))
        self.assertEqual(re.findall(r'class="nodata">([^<]*)', html), [])
        self.assertEqual(html.count("<svg"), 11)
        self.assertEqual(len(plots), 11)
        self.assertEqual(plots[0], "01.svg")
        for title in ("Examples/s vs workers", "Network bytes sent", "Cluster CPU",
                      "Peak RSS, all tasks", "Training time", "Time to target accuracy",
                      "CPU per task", "Peak RSS per task", "Per host", "Training loss (worker 0) vs global step",
                      "Training loss (worker 0) vs time"):
            self.assertNotEqual(chart(html, title), "", title)
        scaling = chart(html, "Examples/s vs workers")
        self.assertHas("ps-w-w 1ps b128 sync 1gbit ideal", scaling)
        self.assertHas(">2000<", scaling)
        self.assertHas(">40 MB<", chart(html, "Network bytes sent"))
        self.assertHas("&lt;b&gt;chief&lt;/b&gt;", html)
        self.assertLacks("<b>chief", html)
        self.assertHas("pw-w needs 2 or more workers", html)
        # Every run is linked to its own report; figures are in people's units.
        for c in combos:
            if not c["skip"]:
                name = sweep.run_name(c, 1)
                self.assertHas('<a href="runs/%s/run/report.html">%s</a>' % (name, name), html)
        self.assertHas("<td>2000</td>", html)  # workers_examples_per_sec, fmt_count
        self.assertHas("<td>40.0 MB</td>", html)  # external_bytes_sent
        assert_self_contained(self, html, run_links=True)

    def test_an_empty_sweep_still_writes_a_page(self):
        html, charts = fulcrum_report.render_sweep_page([], [])
        self.assertTrue(html.startswith("<!DOCTYPE html>"))
        self.assertEqual(charts, [])
        self.assertHas("no data", html)


class ComparePageTest(Test):
    """scripts/compare_runs.py: several runs (a cluster report, a single-mode summary)
    overlaid per global step, one color per run on every chart."""

    def single(self):
        return {"job": "worker", "model": "mlp", "batch_size": 128, "examples_per_sec": 5e4,
                "series": {"steps": {"unix_s": [1.0, 2.0], "global_step": [10, 20],
                                     "loss": [1.5, 0.7], "examples_per_sec": [4e4, 5e4]}}}

    def test_every_run_on_every_chart_and_in_the_table(self):
        html = fulcrum_report.render_compare_page([("cluster-run", report()),
                                                   ("single-run", self.single())])
        self.assertEqual(html.count("<svg"), 3)
        loss = chart(html, "Training loss")
        self.assertHas("cluster-run", loss)
        self.assertHas("single-run", loss)
        self.assertHas("cluster-run", chart(html, "Test accuracy"))
        self.assertHas("<td>single-run</td><td>mlp</td>", html)
        self.assertHas("0.8123", html)  # the cluster run's final accuracy
        assert_self_contained(self, html)

    def test_runs_without_series_say_no_data(self):
        html = fulcrum_report.render_compare_page([("a", {}), ("b", 42)])
        self.assertEqual(html.count("<svg"), 0)
        self.assertHas("Training loss: no data", html)
        self.assertHas("<td>a</td>", html)

    def test_command_line_reads_run_dirs_and_names_a_bad_one(self):
        cli = os.path.join(ROOT, "scripts", "compare_runs.py")
        with tempfile.TemporaryDirectory() as d:
            cluster, single = os.path.join(d, "c1"), os.path.join(d, "s1")
            os.makedirs(cluster)
            os.makedirs(single)
            with open(os.path.join(cluster, "report.json"), "w") as f:
                json.dump(report(), f)
            with open(os.path.join(single, "summary.json"), "w") as f:
                json.dump(self.single(), f)
            out = os.path.join(d, "compare.html")
            p = subprocess.run([sys.executable, cli, cluster, single, "-o", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertHas("c1", chart(read(out), "Training loss"))
            self.assertHas("s1", chart(read(out), "Training loss"))
            empty = os.path.join(d, "empty")
            os.makedirs(empty)
            p = subprocess.run([sys.executable, cli, cluster, empty, "-o", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertHas("empty: no report.json or summary.json", p.stderr)
            p = subprocess.run([sys.executable, cli, cluster, "--label", "x", single, "-o", out],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertHas("1 --label for 2 runs", p.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        with open(sys.argv[1], "w") as f:
            json.dump(report(), f, indent=1)
        sys.exit(0)
    unittest.main()
