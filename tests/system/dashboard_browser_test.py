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
CHART_JS = "/usr/share/javascript/chart.js/chart.min.js"


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


def check_dashboard(driver, by, fixture, mode, shots):
    driver.get(fixture.url)
    assert driver.title.startswith("tunefarm"), driver.title

    # --- charts: which drawing the page chose
    charts = driver.execute_script("return document.documentElement.dataset.charts")
    assert charts == mode, f"page draws with {charts!r}, expected {mode!r}"

    # --- the sweep, by name, and its progress moving
    def sweep_card():
        for card in driver.find_elements(by.CSS_SELECTOR, "#sweeps .sweep"):
            if card.find_element(by.CSS_SELECTOR, ".sweep-name").text == "nightly-gemm":
                return card
        return None

    card = wait_for("the sweep 'nightly-gemm'", sweep_card)
    state = card.find_element(by.CSS_SELECTOR, ".state").text.lower()
    assert state == "running", state

    def pairs_done():
        text = sweep_card().find_element(by.CSS_SELECTOR, ".pairs").text  # "123 / 960 pairs"
        done, total = text.replace(",", "").replace(" pairs", "").split(" / ")
        assert int(total) == 960, text
        return int(done)

    first = pairs_done()
    wait_for("the sweep's progress to advance", lambda: pairs_done() >= first + 20, timeout=10)
    bar_now = driver.execute_script(
        "const b = arguments[0].querySelector('.progress');"
        "return [Number(b.getAttribute('aria-valuenow')), "
        "        arguments[0].querySelector('.progress-ok').getBoundingClientRect().width];",
        sweep_card())
    assert bar_now[0] > first and bar_now[1] > 0, bar_now
    detail = sweep_card().find_element(by.CSS_SELECTOR, ".detail").text
    assert "ETA" in detail and "failed" in detail, detail

    # A name with markup is shown as text, never parsed.
    names = [e.text for e in driver.find_elements(by.CSS_SELECTOR, "#sweeps .sweep-name")]
    assert "rmsnorm-<b>smoke</b>" in names, names
    assert not driver.find_elements(by.CSS_SELECTOR, "#sweeps b"), "markup from the API was parsed"

    # --- workers and their GPUs; a simulated worker joins after 3 s
    def gpu_names():
        return [e.text for e in driver.find_elements(by.CSS_SELECTOR, "#workers-body .gpu-name")]

    wait_for("the GPUs of gpu-node-1",
             lambda: {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"} <= set(gpu_names()))
    wait_for("the simulated worker", lambda: "Simulated NVIDIA L4" in gpu_names(), timeout=10)
    badges = driver.find_elements(by.CSS_SELECTOR, "#workers-body .badge-sim")
    assert len(badges) == 1 and badges[0].text == "SIMULATED", [b.text for b in badges]
    workers = [e.text for e in driver.find_elements(by.CSS_SELECTOR, "#workers-body .worker-name")]
    assert workers == ["gpu-node-1:4242", "sim-host:77"], workers

    # --- the comparison: one chart per (op, dtype, shape), every GPU model in it
    models = ["h100-80gb-hbm3", "a100-sxm4-80gb", "sim-l4 (sim)"]
    groups = driver.find_elements(by.CSS_SELECTOR, "#compare .compare-group")
    assert len(groups) == 2, f"{len(groups)} comparison groups"
    if mode == "chartjs":
        def chart_state():
            return driver.execute_script("""
              return [...document.querySelectorAll('#compare .compare-group canvas')].map((c) => {
                const ch = Chart.getChart(c);
                return ch && { labels: ch.data.labels, data: ch.data.datasets[0].data,
                               w: c.clientWidth, h: c.clientHeight };
              });""")

        def charts_complete():
            state = chart_state()
            return len(state) == 2 and all(s and s["labels"] == models for s in state) and state

        state = wait_for("both charts to show every GPU model", charts_complete)
        for s in state:
            assert all(v > 0 for v in s["data"]), s
            assert s["data"][0] < s["data"][1] < s["data"][2], s  # h100 < a100 < l4 here
            assert s["w"] > 100 and s["h"] > 50, s
    else:
        def bar_rows():
            rows = []
            for g in driver.find_elements(by.CSS_SELECTOR, "#compare .compare-group"):
                labels = [e.text for e in g.find_elements(by.CSS_SELECTOR, ".bar-label")]
                widths = [e.size["width"] for e in g.find_elements(by.CSS_SELECTOR, ".bar")]
                rows.append((labels, widths))
            return rows

        def bars_complete():
            rows = bar_rows()
            return len(rows) == 2 and all(labels == models for labels, _ in rows) and rows

        for labels, widths in wait_for("bars for every GPU model", bars_complete):
            assert all(w > 0 for w in widths), widths
            assert widths[0] < widths[1] < widths[2], widths
        best = driver.find_elements(by.CSS_SELECTOR, "#compare .bar.best")
        assert len(best) == 2, f"{len(best)} bars marked best"
    sim = [b for b in driver.find_elements(by.CSS_SELECTOR, "#compare .badge-sim") if b.is_displayed()]
    assert len(sim) == 2, "simulated figures are not labelled in the comparison"

    # --- best so far: a row per (shape, GPU model)
    rows = wait_for("six best-so-far rows",
                    lambda: len(driver.find_elements(by.CSS_SELECTOR, "#best-body tr")) == 6 and
                    driver.find_elements(by.CSS_SELECTOR, "#best-body tr"))
    first_row = [td.text for td in rows[0].find_elements(by.TAG_NAME, "td")]
    assert first_row[0] == "gemm" and first_row[3] == "h100-80gb-hbm3", first_row
    assert first_row[5].endswith("\u00b5s") or first_row[5].endswith("ms"), first_row

    conn = driver.find_element(by.ID, "conn")
    assert conn.get_attribute("data-state") == "live", conn.text

    if shots:
        driver.save_screenshot(os.path.join(shots, f"dashboard_{mode}.png"))

    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, f"console errors: {errors}"

    # --- the coordinator goes away: the page says so and keeps the last data
    fixture.stop()
    wait_for("the page to show it is disconnected",
             lambda: driver.find_element(by.ID, "conn").get_attribute("data-state") == "error",
             timeout=10)
    assert sweep_card() is not None, "the last data vanished when the server did"
    driver.get_log("browser")  # the failed polls are expected errors


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
        from selenium.webdriver.common.by import By
    except ImportError as e:
        skip(f"python3-selenium is not installed ({e})")
    chromium = find("chromium", "chromium-browser")
    chromedriver = find("chromedriver")
    if not chromium:
        skip("chromium is not installed")
    if not chromedriver:
        skip("chromedriver (chromium-driver) is not installed")

    modes = ["chartjs", "dom"] if os.path.exists(CHART_JS) else ["dom"]
    if modes == ["dom"]:
        print(f"note: {CHART_JS} missing (libjs-chart.js); checking the DOM bars only")

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
                    check_dashboard(driver, By, fixture, mode, shots)
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
