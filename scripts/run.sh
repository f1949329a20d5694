#!/usr/bin/env bash
# Installs what is missing, builds Release into build/, makes a dev token for team_demo and runs
# gatewayd, by default on 127.0.0.1:8080 with its data in ./data (relative to the repository root).
# GATEWAY_LISTEN, GATEWAY_DATA_DIR and GATEWAY_TOKENS_FILE change where (not as flags: run.sh
# gives those three itself); any other GATEWAY_* variable reaches gatewayd as it is, and arguments
# are passed on to it (scripts/run.sh --rate-limit 100).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh

gw_install_deps

# Warnings are errors in CI (scripts/test.sh), not when someone just wants to run the service:
# A user's build should not stop on a warning a newer compiler adds; test.sh builds with -Werror.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGATEWAY_SANITIZE=OFF -DGATEWAY_WERROR=OFF
cmake --build build -j"$(nproc)" --target gatewayd gatewayctl kafka_mock

LISTEN="${GATEWAY_LISTEN:-127.0.0.1:8080}"
DATA_DIR="${GATEWAY_DATA_DIR:-./data}"
TOKENS="${GATEWAY_TOKENS_FILE:-${DATA_DIR}/tokens}"
mkdir -p "${DATA_DIR}"
# One dev token at a time: the previous run's is revoked (its line removed; a running gatewayd
# re-reads the file when it changes). Tokens are stored hashed, so an old one cannot be shown again.
if [[ -f "${TOKENS}" ]]; then
  sed -i '/^[0-9a-fA-F]\{64\} team_demo dev$/d' "${TOKENS}"
fi
TOKEN=$(build/gatewayctl token create --tokens-file "${TOKENS}" --tenant team_demo --name dev)

# An address with port 0 gets its port when gatewayd starts: it prints `listening on ...`.
URL="http://${LISTEN}"
cat <<MSG

Dev token for tenant team_demo (a new one each run, the previous one revoked; its hash is in
${TOKENS}):
  ${TOKEN}

Try:
  curl -s -H "Authorization: Bearer ${TOKEN}" -H "X-Tenant-ID: team_demo" ${URL}/v1/domain

MSG

exec build/gatewayd --listen "${LISTEN}" --data-dir "${DATA_DIR}" --tokens-file "${TOKENS}" "$@"
