#!/usr/bin/env bash
# The installed package, as a person gets it: installs the .deb with apt, then starts the
# app the way the menu does — the desktop entry's Exec line, no arguments — with nothing of
# this checkout in reach: the checkout is hidden (an empty tmpfs over it, bubblewrap), HOME is
# an empty folder, PATH is /usr/bin:/bin, and OpenCode's variables are unset. Whatever the
# package lacks fails here. A session bus runs for the single-instance handshake.
#
# Usage (inside an X server, e.g. xvfb-run): tests/e2e/package-e2e.sh path/to/berth.deb
set -euo pipefail
DEB="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
SCRATCH="$(mktemp -d /tmp/berth-package.XXXXXX)"
PORT="${TAURI_DRIVER_PORT:-4454}"
cleanup() {
  [[ -n "${DRIVER_PID:-}" ]] && { kill "$DRIVER_PID" 2>/dev/null || true; wait "$DRIVER_PID" 2>/dev/null || true; }
  [[ -n "${NOTIFICATIONS_PID:-}" ]] && kill "$NOTIFICATIONS_PID" 2>/dev/null || true
  [[ -n "${BUS_PID:-}" ]] && kill "$BUS_PID" 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
SUDO=""
[[ $(id -u) == 0 ]] || SUDO="sudo"

echo "package: installing $(basename "$DEB")"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --reinstall "$DEB" >/dev/null
dpkg-query -W -f='installed ${Package} ${Version}\n' berth

# What the menu runs: the Exec line of the installed entry, its field codes (%F…) dropped.
ENTRY="$(dpkg -L berth | grep '^/usr/share/applications/.*\.desktop$' | head -n1)"
[[ -n "$ENTRY" ]] || { echo "package: the package installs no desktop entry" >&2; exit 1; }
read -r -a EXEC <<<"$(sed -n 's/^Exec=//p' "$ENTRY" | head -n1 | sed 's/ %[fFuU]//g')"
APP="$(PATH=/usr/bin:/bin command -v "${EXEC[0]}")"
echo "package: $ENTRY runs $APP ${EXEC[*]:1}"

# Everything the app may see lives outside the checkout: an empty HOME, the project the test
# opens through the picker, a second one for the second launch, and the driver binary.
mkdir -p "$SCRATCH/home" "$SCRATCH/bin" "$SCRATCH/other/.opencode/tools"
cp -r "$ROOT/fixtures/demo-project" "$SCRATCH/project"
printf 'export default { description: "From the other project", args: {}, async execute() { return "other" } }\n' \
  >"$SCRATCH/other/.opencode/tools/other_tool.ts"
cp "$(command -v tauri-driver)" "$SCRATCH/bin/tauri-driver"

# The session bus (single instance, notifications), reachable inside the sandbox.
eval "$(dbus-daemon --session --fork --print-address=1 --print-pid=1 | {
  read -r addr; read -r pid; printf 'BUS_ADDRESS=%q BUS_PID=%q\n' "$addr" "$pid"; })"

# The desktop's notification service: it records what it is sent and clicks each one (Debian's
# python3, which has the python3-dbus and python3-gi packages the set-up installs).
NOTIFY_LOG="$SCRATCH/notifications.jsonl"
: >"$NOTIFY_LOG"
coproc NOTIFICATIONS { DBUS_SESSION_BUS_ADDRESS="$BUS_ADDRESS" exec /usr/bin/python3 "$ROOT/tests/support/mock-notifications.py" "$NOTIFY_LOG"; }
read -r ready <&"${NOTIFICATIONS[0]}"
[[ $ready == ready ]] || { echo "package: the notification service did not start" >&2; exit 1; }

# Runs a command as the installed app's world sees it.
cat >"$SCRATCH/as-installed" <<SH
#!/bin/sh
exec bwrap --die-with-parent --dev-bind / / --tmpfs "$ROOT" --chdir "$SCRATCH/home" -- \\
  env -i HOME="$SCRATCH/home" PATH=/usr/bin:/bin DISPLAY="\${DISPLAY}" XAUTHORITY="\${XAUTHORITY:-}" \\
    DBUS_SESSION_BUS_ADDRESS="$BUS_ADDRESS" LANG=C.UTF-8 \\
    BERTH_TEST_PICK_FOLDER="$SCRATCH/project" "\$@"
SH
chmod +x "$SCRATCH/as-installed"
"$SCRATCH/as-installed" test ! -e "$ROOT/Cargo.toml" || { echo "package: the checkout is still visible" >&2; exit 1; }

"$SCRATCH/as-installed" "$SCRATCH/bin/tauri-driver" --port "$PORT" --native-port "$((PORT + 1))" >"$SCRATCH/driver.log" 2>&1 &
DRIVER_PID=$!
for _ in $(seq 1 100); do
  curl -s -m 1 "http://127.0.0.1:$PORT/status" >/dev/null 2>&1 && break
  sleep 0.1
done
PACKAGE_SHOT="$ROOT/test-artifacts/package-window.png" AS_INSTALLED="$SCRATCH/as-installed" NOTIFY_LOG="$NOTIFY_LOG" \
  node "$HERE/package.mjs" "$APP" "$PORT" "$SCRATCH" "${EXEC[@]:1}" || {
  echo "--- tauri-driver log" >&2
  tail -n 40 "$SCRATCH/driver.log" >&2
  rm -rf "$ROOT/test-artifacts/package-logs"
  cp -r "$SCRATCH/home/.local/share/berth/logs" "$ROOT/test-artifacts/package-logs" 2>/dev/null &&
    echo "--- the app's log: test-artifacts/package-logs" >&2
  exit 1
}
