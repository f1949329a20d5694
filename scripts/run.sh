#!/usr/bin/env bash
# Installs what is missing, builds Release into build/, creates a dev token for team_demo and runs
# gatewayd on 127.0.0.1:8080 with its data in ./data (relative to the repository root).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

gw_install_deps

# Warnings are errors in CI (scripts/test.sh), not when someone just wants to run the service:
# A user's build should not stop on a warning a newer compiler adds; test.sh builds with -Werror.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGATEWAY_SANITIZE=OFF -DGATEWAY_WERROR=OFF
cmake --build build -j"$(nproc)" --target gatewayd gatewayctl

mkdir -p data
TOKEN=$(build/gatewayctl token create --tokens-file ./data/tokens --tenant team_demo --name dev)

cat <<MSG

Dev token for tenant team_demo (a new one each run; the hash is in ./data/tokens):
  ${TOKEN}

Try:
  curl -s -H "Authorization: Bearer ${TOKEN}" -H "X-Tenant-ID: team_demo" http://127.0.0.1:8080/v1/domain

MSG

exec build/gatewayd --listen 127.0.0.1:8080 --data-dir ./data
