#!/usr/bin/env python3
"""The systemd side of the farm: the unit templates of the Ansible roles, as
rendered, rate OK in `systemd-analyze security` (offline), and the coordinator
and a worker tell a Type=notify service manager when they are ready.

Usage: service_units_test.py TUNEFARM_BINARY SOURCE_DIR   (exit 77: no jinja2 or systemd-analyze)
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import tempfile

binary, source = sys.argv[1], sys.argv[2]
try:
    import jinja2
except ImportError:
    print("SKIP: no python3-jinja2")
    sys.exit(77)
if not shutil.which("systemd-analyze"):
    print("SKIP: no systemd-analyze")
    sys.exit(77)

failures = []
work = tempfile.mkdtemp(prefix="tunefarm-units.")
try:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    values = dict(ansible_managed="managed", tunefarm_install_prefix="/opt/tunefarm", tunefarm_install_user="tunefarm",
                  tunefarm_install_conf_dir="/etc/tunefarm", tunefarm_install_bin="/opt/tunefarm/bin/tunefarm",
                  tunefarm_install_stop_timeout=60, tunefarm_install_state_dir="/var/lib/tunefarm",
                  tunefarm_install_cache_dir="/var/cache/tunefarm",
                  tunefarm_nightly_script="/opt/tunefarm/sbin/tunefarm-nightly", tunefarm_nightly_timeout="20h")
    units = {"tunefarm-coordinator.service": "tunefarm_coordinator/templates/tunefarm-coordinator.service.j2",
             "tunefarm-worker@0.service": "tunefarm_worker/templates/tunefarm-worker@.service.j2",
             "tunefarm-nightly.service": "tunefarm_nightly/templates/tunefarm-nightly.service.j2"}
    for unit, template in units.items():
        with open(os.path.join(source, "ansible/roles", template)) as f:
            text = env.from_string(f.read()).render(**values)
        if "nightly" not in unit:  # the nightly job is a oneshot
            if "Type=notify" not in text:
                failures.append(unit + ": not Type=notify")
            if "WatchdogSec=" not in text:
                failures.append(unit + ": no WatchdogSec")
        path = os.path.join(work, unit)
        with open(path, "w") as f:
            f.write(text)
        # --threshold: fail above an exposure of 2.5 ("OK" is below 4).
        r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--threshold=25", path],
                           capture_output=True, text=True)
        rating = (r.stdout.strip().splitlines() or ["?"])[-1]
        print(unit + ": " + rating)
        if r.returncode != 0:
            failures.append(unit + ": " + rating)

    # Readiness: a datagram socket stands in for the service manager.
    notify = os.path.join(work, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify)
    sock.settimeout(20)
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    endpoint = "tcp://127.0.0.1:%d" % port.getsockname()[1]
    port.close()
    child_env = dict(os.environ, NOTIFY_SOCKET=notify)
    # The coordinator under a 0.4 s watchdog: its loop pings every 0.2 s.
    coordinator = subprocess.Popen([binary, "coordinator", "--bind", endpoint, "--store", os.path.join(work, "db")],
                                   env=dict(child_env, WATCHDOG_USEC="400000"), stderr=subprocess.DEVNULL)
    worker = None
    pings = []

    def next_message():
        """The next message that is not a watchdog ping (those are counted)."""
        while True:
            m = sock.recv(4096).decode()
            if m != "WATCHDOG=1":
                return m
            pings.append(time.monotonic())

    try:
        message = next_message()
        print("coordinator: " + message.replace("\n", " | "))
        if not message.startswith("READY=1") or endpoint not in message:
            failures.append("coordinator said %r" % message)
        worker = subprocess.Popen([binary, "worker", "--connect", endpoint, "--backend", "sim"], env=child_env,
                                  stderr=subprocess.DEVNULL)
        message = next_message()
        print("worker: " + message.replace("\n", " | "))
        if not message.startswith("READY=1"):
            failures.append("worker said %r" % message)
        # The pings of 1.5 s of the coordinator's loop.
        sock.settimeout(0.1)
        window = time.monotonic()
        while time.monotonic() - window < 1.5:
            try:
                next_message()
            except socket.timeout:
                pass
        recent = [t for t in pings if t >= window]
        print("watchdog: %d pings from the coordinator's loop in 1.5 s" % len(recent))
        if len(recent) < 5:
            failures.append("the coordinator's loop pinged its 0.4 s watchdog %d times in 1.5 s" % len(recent))
        sock.settimeout(20)
        coordinator.terminate()
        coordinator.wait(timeout=30)
        message = next_message()
        if message != "STOPPING=1":
            failures.append("coordinator said %r on stop" % message)
    except socket.timeout:
        failures.append("no readiness message within 20 s")
    finally:
        for p in (coordinator, worker):
            if p and p.poll() is None:
                p.kill()
                p.wait()
finally:
    shutil.rmtree(work, ignore_errors=True)

for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
