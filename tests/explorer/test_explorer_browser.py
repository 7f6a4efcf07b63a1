#!/usr/bin/env python3
"""The step explorer rendered in a real browser (headless Chromium), as a learner opens it.

Trains a tiny model for 4 steps with train_gpt --report --trace --metrics --print-tape (step 2
profiled, a checkpoint written right after it), renders the report with `chromium --headless --dump-dom`, keeps a screenshot as a test
artifact (<build>/tests/explorer/explorer.png) and checks:
  - no JavaScript error: none on Chromium's console log, none reported into the page (#errors);
  - body[data-ready="1"]: everything was drawn;
  - one data-launch per launch of the recorded step (counted in the Chrome trace, independently);
  - one data-node per node of the tape that --print-tape printed for the same step, same ids,
    each with its gradient norm after backward (data-grad-norm, a positive number) drawn in it;
  - the host's work as labelled bands, one per host span of the step in the trace's "host work"
    track: the batch read (data), the status read (host wait) and the checkpoint, each on a lane
    named after its phase;
  - every memory ledger category drawn (data-ledger);
  - a roofline point (data-kernel) for every kernel of the step that does FLOPs;
  - the summary's tokens/s is the median of the --metrics tokens_per_s of the unprofiled steps
    after the first (3 and 4), to the bit.
Then the reports of debug_step and profile_op (one pass each, given their programs): no
JavaScript error, data-ready, one data-launch per launch and one data-node per tape node of the
page's data, each node with a positive gradient norm drawn in it.

Usage: test_explorer_browser.py <train_gpt> <data> <artifact dir> [<debug_step> <profile_op>]. Without Chromium it skips
(exit 77) under a bare ctest, and fails when GLASS_REQUIRE_ORACLE=1 (make test, whose setup
installs it: scripts/setup.sh --test).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from html.parser import HTMLParser

CATEGORIES = ["parameters", "master_weights", "optimizer_moments", "gradients",
              "saved_activations", "temporaries", "allocator_cache"]


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_args(chromium):
    args = [chromium, "--headless", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--allow-file-access-from-files", "--enable-logging=stderr", "--v=0"]
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run its sandbox as root
    return args


class Dom(HTMLParser):
    """Every element's attributes, the text of #errors, and every SVG text with its class."""

    def __init__(self):
        super().__init__()
        self.elements = []
        self.errors = ""
        self.texts = []  # (class, text) of each <text>
        self._in_errors = 0
        self._text_class = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        if a.get("id") == "errors":
            self._in_errors = 1
        if tag == "text":
            self._text_class = a.get("class", "")
            self.texts.append([self._text_class, ""])

    def handle_endtag(self, tag):
        if self._in_errors and tag == "div":
            self._in_errors = 0
        if tag == "text":
            self._text_class = None

    def handle_data(self, data):
        if self._in_errors:
            self.errors += data
        if self._text_class is not None:
            self.texts[-1][1] += data


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def render(chromium, report):
    """The report's DOM after its script ran; fails on a JavaScript error or an unfinished page."""
    url = "file://" + os.path.abspath(report)
    dump = subprocess.run(chromium_args(chromium) + ["--dump-dom", url], capture_output=True,
                          text=True, timeout=120)
    if dump.returncode != 0:
        fail("chromium --dump-dom failed ({}):\n{}".format(dump.returncode, dump.stderr[-3000:]))
    console = [l for l in dump.stderr.splitlines() if "CONSOLE" in l]
    js_errors = [l for l in console if re.search(r"Uncaught|Error|error", l)]
    if js_errors:
        fail("JavaScript errors on the console of {}:\n".format(report) + "\n".join(js_errors))
    dom = Dom()
    dom.feed(dump.stdout)
    if dom.errors.strip():
        fail("the page {} reported errors:\n".format(report) + dom.errors)
    body = [a for t, a in dom.elements if t == "body"]
    if not body or body[0].get("data-ready") != "1":
        fail("{}: body has no data-ready=\"1\": the page did not finish drawing".format(report))
    if body[0].get("data-errors"):
        fail("{}: the page counted {} errors".format(report, body[0]["data-errors"]))
    return dom


def check_grad_norms(dom, node_elems, nodes):
    """Every tape node carries a positive gradient norm (data-grad-norm) and draws its label."""
    bad_norms = [a for a in node_elems if not re.fullmatch(r"[0-9.e+-]+", a.get("data-grad-norm", ""))
                 or float(a["data-grad-norm"]) <= 0]
    if bad_norms:
        fail("{} tape nodes without a positive gradient norm, e.g. {}".format(
            len(bad_norms), bad_norms[:3]))
    norm_labels = [t for c, t in dom.texts if c == "gnorm"]
    if len(norm_labels) < nodes or any(not t.startswith("|∂out| ") for t in norm_labels):
        fail("{} gradient-norm labels drawn for {} nodes: {}".format(
            len(norm_labels), nodes, norm_labels[:5]))


def page_data(report):
    """The page's data (the JSON its script reads), straight from the file."""
    html = open(report, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="glass-data">(.*?)</script>', html, re.S)
    if not m:
        fail("{} has no glass-data script".format(report))
    return json.loads(m.group(1))


def check_pass_report(chromium, command, report):
    """A one-pass report (debug_step, profile_op): drawn, a launch element per launch and a node
    element per tape node of its data, each node with its gradient norm, no roofline point above
    its unit's roof."""
    if os.path.exists(report):
        os.remove(report)
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        fail("{} failed:\n{}{}".format(command[0], run.stdout, run.stderr))
    data = page_data(report)
    dom = render(chromium, report)
    launch_ids = sorted(int(a["data-launch"]) for t, a in dom.elements if "data-launch" in a)
    if launch_ids != list(range(len(data["launches"]))):
        fail("{}: {} data-launch elements for {} launches".format(
            report, len(launch_ids), len(data["launches"])))
    tape_ids = set(n["id"] for n in data["tape"])
    node_elems = [a for t, a in dom.elements if "data-node" in a]
    if not tape_ids or set(int(a["data-node"]) for a in node_elems) != tape_ids or \
            len(node_elems) != len(tape_ids):
        fail("{}: {} data-node elements for a tape of {}".format(
            report, len(node_elems), len(tape_ids)))
    check_grad_norms(dom, node_elems, len(tape_ids))
    above = [a for t, a in dom.elements if "above" in a.get("class", "").split()]
    if above:
        fail("{}: {} roofline points above their roof".format(report, len(above)))
    return len(tape_ids)


def main():
    train_gpt, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
    chromium = find_chromium()
    if chromium is None:
        msg = ("chromium not found: the browser test of the step explorer needs it "
               "(scripts/setup.sh --test installs it)")
        if os.environ.get("GLASS_REQUIRE_ORACLE") == "1":
            fail(msg + "; it is required (GLASS_REQUIRE_ORACLE=1)")
        print("explorer browser test skipped: " + msg)
        sys.exit(77)
    os.makedirs(out, exist_ok=True)
    report, trace, metrics = (os.path.join(out, n) for n in ("explorer.html", "trace.json", "metrics.jsonl"))
    for p in (report, trace, metrics):
        if os.path.exists(p):
            os.remove(p)
    checkpoints = os.path.join(out, "checkpoints")
    shutil.rmtree(checkpoints, ignore_errors=True)
    run = subprocess.run(
        [train_gpt, "--device", "cpu", "--data", data, "--n-layer", "1", "--n-head", "2",
         "--n-embd", "16", "--seq-len", "8", "--batch", "2", "--steps", "4", "--sample", "0",
         "--eval-every", "2", "--eval-batches", "1", "--threads", "1", "--quiet",
         "--report", report, "--trace", trace, "--metrics", metrics, "--print-tape",
         "--checkpoint-dir", checkpoints, "--checkpoint-every", "2"],
        capture_output=True, text=True)
    if run.returncode != 0:
        fail("train_gpt failed:\n" + run.stdout + run.stderr)

    # The recorded step's tape as --print-tape printed it.
    m = re.search(r"tape of step (\d+):\ntape: (\d+) nodes", run.stdout)
    if not m:
        fail("no tape printed:\n" + run.stdout)
    step = int(m.group(1))
    tape_ids = set(int(i) for i in re.findall(r"^  #(\d+) ", run.stdout[m.start():], re.M))
    if len(tape_ids) != int(m.group(2)):
        fail("--print-tape says {} nodes but lists {}".format(m.group(2), len(tape_ids)))

    # The step's launches, from the trace: one complete event per launch, with its step.
    events = json.load(open(trace))["traceEvents"]
    launches = [e for e in events if e.get("ph") == "X" and "seq" in e.get("args", {})
                and e["args"].get("step") == step]
    flop_kernels = set(e["args"]["kernel"] for e in launches if e["args"]["flops"] > 0
                       and e["args"]["bytes"] > 0)
    traced_nodes = set(e["args"]["node_id"] for e in launches if e["args"]["node_id"] >= 0)
    if not traced_nodes <= tape_ids:
        fail("trace node ids not in the printed tape: {}".format(sorted(traced_nodes - tape_ids)))

    # The step's host work (no launches): the trace's "host work" track.
    host_spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "host"
                  and e["args"]["step"] == step]
    host_phases = set(e["args"]["phase"] for e in host_spans)
    if not {"data", "host wait", "checkpoint"} <= host_phases:
        fail("the trace's host spans of step {} have phases {}: expected data, host wait and "
             "checkpoint".format(step, sorted(host_phases)))

    steps = [json.loads(line) for line in open(metrics)]
    typical = [s["tokens_per_s"] for s in steps if s["step"] not in (1, step)]
    expected_tps = statistics.median(typical)

    # Render: the DOM after the page's script ran, Chromium's log on stderr.
    url = "file://" + os.path.abspath(report)
    t0 = time.monotonic()
    dom = render(chromium, report)
    render_s = time.monotonic() - t0
    shot = subprocess.run(chromium_args(chromium) + [
        "--screenshot=" + os.path.join(out, "explorer.png"), "--window-size=1280,3000", url],
        capture_output=True, text=True, timeout=120)
    if shot.returncode != 0:
        fail("chromium --screenshot failed:\n" + shot.stderr[-3000:])

    launch_ids = [a["data-launch"] for t, a in dom.elements if "data-launch" in a]
    if sorted(map(int, launch_ids)) != list(range(len(launches))):
        fail("{} data-launch elements (indices {}...) for the step's {} launches".format(
            len(launch_ids), sorted(map(int, launch_ids))[:5], len(launches)))
    node_ids = set(int(a["data-node"]) for t, a in dom.elements if "data-node" in a)
    node_elems = [a for t, a in dom.elements if "data-node" in a]
    if node_ids != tape_ids or len(node_elems) != len(tape_ids):
        fail("data-node ids {} elements, {} distinct; the tape has {}: missing {}, extra {}".format(
            len(node_elems), len(node_ids), len(tape_ids), sorted(tape_ids - node_ids)[:10],
            sorted(node_ids - tape_ids)[:10]))
    check_grad_norms(dom, node_elems, len(tape_ids))
    bands = [a for t, a in dom.elements if "data-host-span" in a]
    if sorted(int(a["data-host-span"]) for a in bands) != list(range(len(host_spans))):
        fail("{} host-span bands for the step's {} host spans".format(len(bands), len(host_spans)))
    band_phases = set(a["data-phase"] for a in bands)
    lane_names = set(t for c, t in dom.texts)
    band_labels = [t for c, t in dom.texts if c.startswith("band-label")]
    if band_phases != host_phases or not host_phases <= lane_names:
        fail("bands of phases {} on lanes {}; the trace's host spans have {}".format(
            sorted(band_phases), sorted(lane_names & host_phases), sorted(host_phases)))
    # Each band's label starts with its span's name (a band beyond the view adds where it is).
    names = sorted(e["name"] for e in host_spans)
    if len(band_labels) != len(names) or not all(
            any(label.startswith(n) for label in band_labels) for n in names):
        fail("band labels {} but the host spans are {}".format(band_labels, names))
    ledger = set(a["data-ledger"] for t, a in dom.elements if "data-ledger" in a)
    if ledger != set(CATEGORIES):
        fail("ledger series {} instead of {}".format(sorted(ledger), CATEGORIES))
    points = set(a["data-kernel"] for t, a in dom.elements if t == "circle" and "data-kernel" in a)
    if points != flop_kernels:
        fail("roofline points {} but the step's kernels with FLOPs are {}".format(
            sorted(points), sorted(flop_kernels)))
    above = [a for t, a in dom.elements if "above" in a.get("class", "").split()]
    if above:
        fail("{} roofline points above their roof".format(len(above)))
    tps = [a for t, a in dom.elements if a.get("data-summary") == "tokens_per_s"]
    if not tps or float(tps[0]["data-value"]) != expected_tps:
        fail("summary tokens/s {} != the metrics' median {} (steps {})".format(
            tps[0]["data-value"] if tps else None, expected_tps, typical))

    passes = ""
    if len(sys.argv) > 5:
        debug_step, profile_op = sys.argv[4], sys.argv[5]
        step_nodes = check_pass_report(chromium, [debug_step, "--device", "cpu", "--report",
                                                  os.path.join(out, "debug_step.html")],
                                       os.path.join(out, "debug_step.html"))
        op_nodes = check_pass_report(chromium, [
            profile_op, "--device", "cpu", "--operation", "mlp", "--shape", "8,16", "--dtype",
            "bf16", "--warmup", "0", "--repeats", "1", "--threads", "1", "--output",
            os.path.join(out, "op.json"),
            "--report", os.path.join(out, "profile_op.html")], os.path.join(out, "profile_op.html"))
        passes = "; debug_step {} and profile_op {} tape nodes with gradient norms".format(
            step_nodes, op_nodes)
    print("explorer OK: {} launches, {} tape nodes with gradient norms, {} host-span bands ({}), "
          "{} roofline kernels, {} KiB, rendered in "
          "{:.2f} s (chromium start included); screenshot {}".format(
              len(launches), len(tape_ids), len(bands), ", ".join(sorted(host_phases)),
              len(points), os.path.getsize(report) // 1024,
              render_s, os.path.join(out, "explorer.png")) + passes)


if __name__ == "__main__":
    main()
