#!/usr/bin/env bash
# ansible-lint over the deployment roles and playbooks.
#
#   tests/system/ansible_lint_test.sh SOURCE_DIR
#
# Exits 77 (skipped) when ansible-lint is missing.
set -euo pipefail
SRC_DIR=$(cd "${1:?usage: $0 SOURCE_DIR}" && pwd)

if ! command -v ansible-lint >/dev/null; then
  echo "SKIP: ansible-lint is not installed (apt-get install ansible-lint)"
  exit 77
fi
cd "$SRC_DIR"
ansible-lint --offline --nocolor ansible/
