#!/usr/bin/env python3
"""Renders the Ansible roles' systemd unit templates for the Debian package.

The package and the roles install the same units (one home: the templates
under ansible/roles/*/templates); this fills in the package's paths.

Usage: render_units.py SOURCE_DIR OUT_DIR   (exit 0 with a note when python3-jinja2 is missing)
"""
import os
import sys

source, out = sys.argv[1], sys.argv[2]
try:
    import jinja2
except ImportError:
    print("render_units: no python3-jinja2; the package goes without systemd units")
    sys.exit(0)

VALUES = dict(ansible_managed="installed by the tunefarm package; /etc/tunefarm/*.env configures it",
              tunefarm_install_prefix="/usr", tunefarm_install_user="tunefarm",
              tunefarm_install_conf_dir="/etc/tunefarm", tunefarm_install_bin="/usr/bin/tunefarm",
              tunefarm_install_stop_timeout=60, tunefarm_install_state_dir="/var/lib/tunefarm",
              tunefarm_install_cache_dir="/var/cache/tunefarm",
              # The package's builder is a builder host's: beside a worker,
              # a drop-in sets Nice= (as the Ansible role does).
              tunefarm_builder_nice=0)
UNITS = {"tunefarm-coordinator.service": "tunefarm_coordinator/templates/tunefarm-coordinator.service.j2",
         "tunefarm-worker@.service": "tunefarm_worker/templates/tunefarm-worker@.service.j2",
         "tunefarm-builder.service": "tunefarm_builder/templates/tunefarm-builder.service.j2"}

os.makedirs(out, exist_ok=True)
env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
for unit, template in UNITS.items():
    with open(os.path.join(source, "ansible/roles", template)) as f:
        text = env.from_string(f.read()).render(**VALUES)
    with open(os.path.join(out, unit), "w") as f:
        f.write(text)
