#!/usr/bin/env bash
# The real desktop window, driven through tauri-driver + WebKitWebDriver under Xvfb.
# Usage (inside an X server, e.g. xvfb-run): tests/e2e/window-e2e.sh /path/to/berth-app
set -euo pipefail
APP="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SCRATCH="$(mktemp -d)"
PORT="${TAURI_DRIVER_PORT:-4444}"
cleanup() {
  if [[ -n "${DRIVER_PID:-}" ]]; then kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; fi
  pkill -P $$ 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

# A scratch machine for the app: its own HOME and a git project; OpenCode's variables cleared.
mkdir -p "$SCRATCH/home" "$SCRATCH/project"
git init -q "$SCRATCH/project"
for v in $(env | sed -n 's/^\(OPENCODE_[A-Z_]*\|XDG_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export HOME="$SCRATCH/home"

# A registry on loopback for the update controls (fixture versions, published by the test);
# its stdin is this shell's pipe, so it ends with the script.
coproc REGISTRY { node "$ROOT/tests/support/registry.mjs" --root "$ROOT/fixtures/registry" --visible berth-update-probe@1.0.0; }
read -r REGISTRY_LINE <&"${REGISTRY[0]}"
REGISTRY_PORT="$(node -e 'console.log(JSON.parse(process.argv[1]).port)' "$REGISTRY_LINE")"
export REGISTRY_URL="http://127.0.0.1:$REGISTRY_PORT/" npm_config_registry="http://127.0.0.1:$REGISTRY_PORT/" npm_config_update_notifier=false

# The person's browser for sign-ins: it follows the provider's page (the fixture's consents at
# once) back to the address Berth listens on, as a person clicking "Allow" would.
cat >"$SCRATCH/browser.sh" <<'SH'
#!/bin/sh
exec node -e 'fetch(process.argv[1], { redirect: "manual" }).then((r) => fetch(r.headers.get("location"))).then((r) => r.text())' "$1"
SH
chmod +x "$SCRATCH/browser.sh"
export BROWSER="$SCRATCH/browser.sh"

# The desktop's opener for "Open log folder": it writes down the folder it was given, as a file
# manager the person has not looked at yet.
mkdir -p "$SCRATCH/bin"
printf '#!/bin/sh\necho "$1" >> "%s"\n' "$SCRATCH/opened.txt" >"$SCRATCH/bin/xdg-open"
chmod +x "$SCRATCH/bin/xdg-open"
export PATH="$SCRATCH/bin:$PATH" OPENED_FILE="$SCRATCH/opened.txt"

tauri-driver --port "$PORT" >"$SCRATCH/driver.log" 2>&1 &
DRIVER_PID=$!
for _ in $(seq 1 100); do
  curl -s -m 1 "http://127.0.0.1:$PORT/status" >/dev/null 2>&1 && break
  sleep 0.1
done
WINDOW_SHOT="$ROOT/test-artifacts/window.png" node "$HERE/window.mjs" "$APP" "$PORT" "$SCRATCH/home" "$SCRATCH/project" "$SCRATCH/data"
