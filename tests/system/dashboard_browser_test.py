#!/usr/bin/env python3
"""The coordinator's dashboard in a real browser.

Starts the dashboard fixture (an HttpServer over a scripted status source
whose numbers move with time), opens its page in Debian's headless chromium
through chromedriver and python3-selenium, and checks what a person would
look at: the sweep and its progress moving, the workers' GPUs, the
comparison chart, the best-so-far table, no errors in the console, and a
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
const visible = (el) => !!el && !el.hidden && el.getClientRects().length > 0;
return {
  charts: document.documentElement.dataset.charts,
  conn: document.getElementById('conn').dataset.state,
  markup: q('#sweeps b').length,
  sweeps: q('#sweeps .sweep').map((c) => ({
    name: text(c.querySelector('.sweep-name')),
    state: text(c.querySelector('.state')),
    pairs: text(c.querySelector('.pairs')),
    detail: text(c.querySelector('.detail')),
    valuenow: Number(c.querySelector('.progress').getAttribute('aria-valuenow')),
    ok_width: c.querySelector('.progress-ok').getBoundingClientRect().width,
  })),
  workers: q('#workers-body .worker-name').map(text),
  gpus: q('#workers-body .gpu-name').map(text),
  worker_badges: q('#workers-body .badge-sim').map(text),
  groups: q('#compare .compare-group').map((g) => {
    const canvas = g.querySelector('canvas');
    const chart = canvas && window.Chart ? Chart.getChart(canvas) : null;
    return {
      title: text(g.querySelector('.compare-title')),
      sim_badge: visible(g.querySelector('.badge-sim')),
      chart: chart ? { labels: chart.data.labels, data: chart.data.datasets[0].data,
                       w: canvas.clientWidth, h: canvas.clientHeight } : null,
      bar_labels: q('.bar-label', g).map(text),
      bar_widths: q('.bar', g).map((b) => b.getBoundingClientRect().width),
      best_bars: q('.bar.best', g).length,
    };
  }),
  best: q('#best-body tr').map((tr) => q('td', tr).map(text)),
};
"""

MODELS = ["h100-80gb-hbm3", "a100-sxm4-80gb", "sim-l4 (sim)"]


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

    # --- the sweep's progress moves: the counts, the bar and its figures
    first = pairs_done(s)
    s = wait_for("the sweep's progress to advance",
                 lambda: (lambda s: pairs_done(s) >= first + 20 and s)(snap()), timeout=10)
    cur = sweep(s)
    assert cur["valuenow"] > first and cur["ok_width"] > 0, cur
    assert "ETA" in cur["detail"] and "failed" in cur["detail"], cur["detail"]

    # A name with markup is shown as text, never parsed.
    done_sweep = sweep(s, "rmsnorm-<b>smoke</b>")
    assert done_sweep and done_sweep["state"].lower() == "done", s["sweeps"]
    assert s["markup"] == 0, "markup from the API was parsed"

    # --- workers and their GPUs; a simulated worker joins after 3 s
    s = wait_for("the GPUs of both workers",
                 lambda: (lambda s: {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
                                     "Simulated NVIDIA L4"} <= set(s["gpus"]) and s)(snap()),
                 timeout=10)
    assert s["workers"] == ["gpu-node-1:4242", "sim-host:77"], s["workers"]
    assert s["worker_badges"] == ["SIMULATED"], s["worker_badges"]

    # --- the comparison: one chart per (op, dtype, shape), every GPU model in it
    def compare_complete(s):
        if len(s["groups"]) != 2:
            return False
        if mode == "chartjs":
            return all(g["chart"] and g["chart"]["labels"] == MODELS for g in s["groups"])
        return all(g["bar_labels"] == MODELS for g in s["groups"])

    s = wait_for("a chart of every GPU model per shape",
                 lambda: (lambda s: compare_complete(s) and s)(snap()))
    for g in s["groups"]:
        assert g["title"].startswith("gemm f16 M="), g
        assert g["sim_badge"], f"simulated figures are not labelled: {g}"
        if mode == "chartjs":
            c = g["chart"]
            assert all(v > 0 for v in c["data"]), c
            assert c["data"][0] < c["data"][1] < c["data"][2], c  # h100 < a100 < l4 here
            assert c["w"] > 100 and c["h"] > 50, c
        else:
            w = g["bar_widths"]
            assert len(w) == 3 and 0 < w[0] < w[1] < w[2], w
            assert g["best_bars"] == 1, g

    # --- best so far: a row per (shape, GPU model)
    s = wait_for("six best-so-far rows", lambda: (lambda s: len(s["best"]) == 6 and s)(snap()))
    row = s["best"][0]
    assert row[0] == "gemm" and row[3] == "h100-80gb-hbm3", row
    assert row[5].endswith("\u00b5s") or row[5].endswith("ms"), row
    assert s["conn"] == "live", s["conn"]

    if shots:
        driver.save_screenshot(os.path.join(shots, f"dashboard_{mode}.png"))

    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"

    # --- the coordinator goes away: the page says so and keeps the last data
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
