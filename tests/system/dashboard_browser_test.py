#!/usr/bin/env python3
"""The coordinator's dashboard in a real browser.

Starts the dashboard fixture (an HttpServer over a scripted status source
whose numbers move with time), opens its page in Debian's headless chromium
through chromedriver and python3-selenium, and checks what a person would
look at: the running sweep and its progress moving, finished sweeps
collapsed, failures by class, the workers' GPUs and leases, one comparison
chart per op over hundreds of keys (throughput, then roofline share), the
best-so-far table, a sweep's own page, no errors in the console, and a
visible "disconnected" when the coordinator goes away. It runs twice: with
Chart.js inlined (when libjs-chart.js is installed) and with the page's own
DOM bars.

usage: dashboard_browser_test.py FIXTURE_BINARY [--keep-screenshots DIR]
Exit 0 = pass, 1 = fail, 77 = skipped (chromium, chromedriver or selenium
missing).
"""

import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
CHART_JS = ["/usr/share/javascript/chart.js/chart.umd.js",   # Chart.js 4
            "/usr/share/javascript/chart.js/chart.min.js"]   # Chart.js 3 (Debian 12)


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def find(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


class Fixture:
    """The fixture process; it exits when we die, through --exit-on-eof."""

    def __init__(self, binary, *args):
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--exit-on-eof", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        line = self._read_line(timeout=15)
        if not line.startswith("listening "):
            self.stop()
            raise AssertionError(f"fixture did not start: {line!r}")
        fields = line.split()
        self.url = fields[1]
        self.chartjs = "chartjs=1" in fields

    def _read_line(self, timeout):
        deadline = time.monotonic() + timeout
        out = b""
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return out.decode(errors="replace")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                break
            out += chunk
        return out.decode(errors="replace").strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(what, predicate, timeout=15, interval=0.2):
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # a stale element while the page redraws
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}" +
                         (f" (last error: {last_error})" if last_error else ""))


# The page redraws tables every second, so element handles go stale between
# two Selenium calls; everything is read in one script, as one consistent view.
SNAPSHOT_JS = r"""
const q = (sel, root) => [...(root || document).querySelectorAll(sel)];
const text = (el) => (el ? el.textContent : null);
// checkVisibility: rows of a closed <details> have boxes, yet are not shown.
// Drawn, whatever the hidden attribute says (a CSS display rule can beat it).
const visible = (el) => !!el && el.getClientRects().length > 0 &&
                        (!el.checkVisibility || el.checkVisibility());
const bars = (root) => q('.fail-row', root).map((r) => [r.dataset.cls, Number(text(r.querySelector('.fail-count')).replace(/,/g, ''))]);
return {
  charts: document.documentElement.dataset.charts,
  conn: document.getElementById('conn').dataset.state,
  markup: q('#sweeps-section b').length,
  farm_visible: visible(document.getElementById('farm')),
  page_visible: visible(document.getElementById('sweep-page')),
  sweeps: q('#sweeps .sweep').map((c) => ({
    name: text(c.querySelector('.sweep-name')),
    link: c.querySelector('.sweep-link') ? c.querySelector('.sweep-link').getAttribute('href') : null,
    state: text(c.querySelector('.state')),
    pairs: text(c.querySelector('.pairs')),
    detail: text(c.querySelector('.detail')),
    valuenow: Number(c.querySelector('.progress').getAttribute('aria-valuenow')),
    ok_width: c.querySelector('.progress-ok').getBoundingClientRect().width,
  })),
  finished_open: document.getElementById('finished').open,
  finished_summary: text(document.getElementById('finished-summary')),
  finished: q('#finished-body tr.finished-sweep').map((tr) => ({
    id: tr.dataset.id, name: text(tr.querySelector('.sweep-link')), state: text(tr.querySelector('.state')),
    visible: visible(tr),
  })),
  failures: bars(document.getElementById('failures')),
  workers: q('#workers-body .worker-name').map(text),
  gpus: q('#workers-body .gpu-name').map(text),
  leases: q('#workers-body tr.worker-first').map((tr) => text(tr.children[tr.children.length - 2])),
  worker_badges: q('#workers-body .badge-sim').map(text),
  page_width: document.documentElement.scrollWidth, window_width: window.innerWidth,
  ops: q('#compare .op-card').map((g) => {
    const canvas = g.querySelector('canvas');
    const chart = canvas && window.Chart ? Chart.getChart(canvas) : null;
    return {
      op: g.dataset.op, keys: Number(g.dataset.keys), models: g.dataset.models,
      title: text(g.querySelector('.compare-title')),
      sim_badge: visible(g.querySelector('.badge-sim')),
      chart: chart ? { labels: chart.data.labels.length, datasets: chart.data.datasets.map((d) => d.label),
                       first: chart.data.datasets.map((d) => d.data[0]), axis: chart.options.scales.y.title.text,
                       w: canvas.clientWidth, h: canvas.clientHeight } : null,
      rows: q('tr.op-key', g).length,
      best_bars: q('.mini-bar.best', g).length,
      first_row: q('tr.op-key', g).slice(0, 1).map((tr) => q('.cell-value', tr).map(text))[0] || [],
    };
  }),
  best: q('#best-body tr').map((tr) => q('td', tr).map(text)),
  page: {
    name: text(document.getElementById('sp-name')), state: text(document.getElementById('sp-state')),
    counts: text(document.getElementById('sp-counts')), failures: bars(document.getElementById('sp-failures')),
    best: q('#sp-best-body tr').map((tr) => q('td', tr).map(text)),
    missing: visible(document.getElementById('sp-missing')),
  },
};
"""

MODELS = "a100-sxm4-80gb,h100-80gb-hbm3,sim-l4"
GEMM_KEYS, RMSNORM_KEYS = 120, 80


def check_dashboard(driver, fixture, mode, shots):
    driver.get(fixture.url)
    assert driver.title.startswith("tunefarm"), driver.title

    def snap():
        return driver.execute_script(SNAPSHOT_JS)

    def sweep(s, name="nightly-gemm"):
        return next((x for x in s["sweeps"] if x["name"] == name), None)

    def pairs_done(s):
        text = sweep(s)["pairs"]  # "123 / 960 pairs"
        done, total = text.replace(",", "").replace(" pairs", "").split(" / ")
        assert int(total) == 960, text
        return int(done)

    s = wait_for("the sweep 'nightly-gemm'", lambda: (lambda s: sweep(s) and s)(snap()))
    assert s["charts"] == mode, f"page draws with {s['charts']!r}, expected {mode!r}"
    assert sweep(s)["state"].lower() == "running", sweep(s)
    assert s["farm_visible"] and not s["page_visible"], s

    # --- the sweep's progress moves: the counts, the bar and its figures
    first = pairs_done(s)
    s = wait_for("the sweep's progress to advance",
                 lambda: (lambda s: pairs_done(s) >= first + 20 and s)(snap()), timeout=10)
    cur = sweep(s)
    assert cur["valuenow"] > first and cur["ok_width"] > 0, cur
    assert "ETA" in cur["detail"] and "failed (compile_error" in cur["detail"], cur["detail"]

    # --- finished sweeps are collapsed into one closed list; only the
    # running sweep has a card.
    assert [x["name"] for x in s["sweeps"]] == ["nightly-gemm"], s["sweeps"]
    assert not s["finished_open"] and s["finished_summary"] == "2 finished sweep(s)", s
    assert [(x["name"], x["state"]) for x in s["finished"]] == [
        ("rmsnorm-<b>smoke</b>", "done"), ("elementwise-trial", "cancelled")], s["finished"]
    assert not any(x["visible"] for x in s["finished"]), "finished sweeps are not collapsed"
    assert s["markup"] == 0, "markup from the API was parsed"

    # --- failures by class over every sweep, largest first
    fails = dict(s["failures"])
    assert fails["wrong_result"] == 3 and fails["crash"] == 2, fails
    assert fails["compile_error"] > 0, fails
    counts = [n for _, n in s["failures"]]
    assert counts == sorted(counts, reverse=True), s["failures"]

    # --- workers, their GPUs and leases; a simulated worker joins after 3 s
    s = wait_for("the GPUs of both workers",
                 lambda: (lambda s: {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
                                     "Simulated NVIDIA L4"} <= set(s["gpus"]) and s)(snap()),
                 timeout=10)
    assert s["workers"] == ["gpu-node-1:4242", "sim-host:77"], s["workers"]
    assert s["leases"] == ["2", "1"], s["leases"]
    assert s["worker_badges"] == ["SIMULATED"], s["worker_badges"]

    # --- the comparison: one card per op however many keys, every GPU model in it
    def compare_complete(s):
        return [(o["op"], o["keys"], o["models"]) for o in s["ops"]] == [
            ("gemm", GEMM_KEYS, MODELS), ("rmsnorm", RMSNORM_KEYS, MODELS)]

    s = wait_for("one chart per op with every GPU model",
                 lambda: (lambda s: compare_complete(s) and s)(snap()))
    for o in s["ops"]:
        assert o["sim_badge"], f"simulated figures are not labelled: {o['title']}"
        if mode == "chartjs":
            c = o["chart"]
            assert c["labels"] == o["keys"], c
            assert c["datasets"] == ["a100-sxm4-80gb", "h100-80gb-hbm3", "sim-l4 (sim)"], c
            a100, h100, l4 = c["first"]
            assert h100 > a100 > l4 > 0, c  # throughput: higher is faster
            assert ("TFLOP/s" if o["op"] == "gemm" else "GB/s") in c["axis"], c
            assert c["w"] > 1000 and c["h"] > 100, c  # wide enough for its keys: it scrolls
        else:
            assert o["rows"] == o["keys"], o
            assert o["best_bars"] == o["keys"], o  # one winner marked per key
            assert o["first_row"][1].endswith("TFLOP/s" if o["op"] == "gemm" else "GB/s"), o
    assert s["page_width"] <= s["window_width"], "a wide chart widens the page instead of scrolling"
    # The metric can change to the roofline share.
    driver.execute_script("const s = document.getElementById('compare-metric'); s.value = 'roofline';"
                          "s.dispatchEvent(new Event('change'));")
    s = snap()
    if mode == "chartjs":
        assert "roofline" in s["ops"][0]["chart"]["axis"], s["ops"][0]["chart"]
        assert 0 < s["ops"][0]["chart"]["first"][1] <= 100, s["ops"][0]["chart"]
    else:
        assert s["ops"][0]["first_row"][1].endswith("%"), s["ops"][0]

    # --- best so far: a row per (key, GPU model)
    s = wait_for("the best-so-far rows",
                 lambda: (lambda s: len(s["best"]) == 3 * (GEMM_KEYS // 2) + 1 and s)(snap()))
    row = s["best"][0]
    assert row[0] == "gemm" and row[3] == "h100-80gb-hbm3", row
    assert row[5].endswith("\u00b5s") or row[5].endswith("ms"), row
    assert s["conn"] == "live", s["conn"]
    if shots:
        driver.save_screenshot(os.path.join(shots, f"dashboard_{mode}.png"))

    # --- a sweep's page: its failures and its best rows only
    driver.get(fixture.url + "#sweep/66a1b2c3-0000")
    s = wait_for("the finished sweep's page",
                 lambda: (lambda s: s["page_visible"] and s["page"]["best"] and s)(snap()))
    assert not s["farm_visible"], "the farm page shows beside the sweep page"
    p = s["page"]
    assert p["name"] == "rmsnorm-<b>smoke</b>" and p["state"] == "done", p
    assert p["failures"] == [["wrong_result", 3], ["crash", 2]], p["failures"]
    assert len(p["best"]) == 1 and p["best"][0][0] == "rmsnorm", p["best"]
    assert "64 / 64 pairs" in p["counts"], p["counts"]
    # From the farm page, the running sweep's link leads to its page.
    driver.get(fixture.url + "#")
    s = wait_for("the farm page again", lambda: (lambda s: s["farm_visible"] and sweep(s) and s)(snap()))
    driver.execute_script("document.querySelector('#sweeps .sweep-link').click();")
    s = wait_for("the running sweep's page with its two failure classes",
                 lambda: (lambda s: s["page_visible"] and len(s["page"]["best"]) == 3 * (GEMM_KEYS // 2) and
                          {c for c, _ in s["page"]["failures"]} == {"compile_error", "timeout"} and s)(snap()))
    assert s["page"]["name"] == "nightly-gemm", s["page"]
    if shots:
        driver.save_screenshot(os.path.join(shots, f"dashboard_sweep_{mode}.png"))
    driver.get(fixture.url + "#sweep/no-such-sweep")
    wait_for("the unknown sweep's note", lambda: snap()["page"]["missing"])

    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"

    # --- the coordinator goes away: the page says so and keeps the last data
    driver.get(fixture.url + "#")
    wait_for("the farm page", lambda: (lambda s: sweep(s) and s)(snap()))
    fixture.stop()
    s = wait_for("the page to show it is disconnected",
                 lambda: (lambda s: s["conn"] == "error" and s)(snap()), timeout=10)
    assert sweep(s) is not None, "the last data vanished with the server"
    # The failed polls are logged: proof that the console check above can see
    # errors at all.
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors, "the browser log shows no failed polls; is console logging working?"


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    fixture_bin = sys.argv[1]
    shots = None
    if len(sys.argv) > 3 and sys.argv[2] == "--keep-screenshots":
        shots = sys.argv[3]
        os.makedirs(shots, exist_ok=True)

    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        # python3-selenium belongs to Debian's interpreter; a python3 from a
        # version manager earlier on PATH does not see it.
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and os.path.exists(system):
            os.execv(system, [system, os.path.abspath(__file__), *sys.argv[1:]])
        skip(f"python3-selenium is not installed ({e})")
    chromium = find("chromium", "chromium-browser")
    chromedriver = find("chromedriver")
    if not chromium:
        skip("chromium is not installed")
    if not chromedriver:
        skip("chromedriver (chromium-driver) is not installed")

    modes = ["chartjs", "dom"] if any(os.path.exists(p) for p in CHART_JS) else ["dom"]
    if modes == ["dom"]:
        print("note: libjs-chart.js is not installed; checking the DOM bars only")

    failed = False
    with tempfile.TemporaryDirectory(prefix="tunefarm-dashboard-") as tmp:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--no-default-browser-check",
                    "--no-proxy-server", "--window-size=1280,1800",
                    f"--user-data-dir={os.path.join(tmp, 'profile')}"]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        service = Service(executable_path=chromedriver, log_path=os.path.join(tmp, "chromedriver.log"))
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except Exception as e:
            print(f"FAIL: cannot start chromium through chromedriver: {e}")
            log = os.path.join(tmp, "chromedriver.log")
            if os.path.exists(log):
                print(open(log, errors="replace").read()[-4000:])
            return 1
        try:
            driver.set_page_load_timeout(30)
            for mode in modes:
                fixture = Fixture(fixture_bin, *([] if mode == "chartjs" else ["--no-chartjs"]))
                try:
                    if (mode == "chartjs") != fixture.chartjs:
                        raise AssertionError(f"fixture chartjs={fixture.chartjs} in mode {mode}")
                    check_dashboard(driver, fixture, mode, shots)
                    print(f"ok: dashboard ({mode}) at {fixture.url}")
                except Exception:
                    failed = True
                    print(f"FAIL: dashboard ({mode})")
                    traceback.print_exc()
                    try:
                        path = os.path.join(shots or os.getcwd(), f"dashboard_{mode}_failure.png")
                        driver.save_screenshot(path)
                        print(f"screenshot: {path}")
                    except Exception:
                        pass
                finally:
                    fixture.stop()
        finally:
            driver.quit()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
