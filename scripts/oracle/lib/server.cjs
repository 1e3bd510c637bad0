// A real `opencode serve` for one prepared case (see discovery.cjs prepareCase): start it in its own
// process group, wait for /global/health, query it with bounded curl calls, stop the whole group.
// Used by scripts/oracle/record-tool-schemas. A watchdog stops the server if the recorder dies first.
"use strict"

const fs = require("node:fs")
const path = require("node:path")
const { spawn } = require("node:child_process")
const { OPENCODE, now } = require("./discovery.cjs")
const { sleep, freePort, curl, killGroup } = require("./proc.cjs")






/**
 * Start `opencode serve` (cwd = c.directory, env = c.env) and wait until /global/health answers.
 * Returns { base, port, pgid, command, ready_ms, stderrFile, stop() }.
 */
function startServer(c, { healthSeconds = 60, extraEnv = {} } = {}) {
  const port = freePort()
  const stdoutFile = path.join(c.tmpRoot, "serve.out")
  const stderrFile = path.join(c.tmpRoot, "serve.err")
  const args = ["serve", "--port", String(port), "--hostname", "127.0.0.1", "--print-logs"]
  const t0 = now()
  const child = spawn(OPENCODE, args, {
    cwd: c.directory,
    env: { ...c.env, ...extraEnv },
    detached: true, // own process group: the whole server tree can be stopped
    stdio: ["ignore", fs.openSync(stdoutFile, "w"), fs.openSync(stderrFile, "w")],
  })
  child.unref()
  const pgid = child.pid
  // Watchdog: it holds the read end of a pipe from this process. When this recorder dies in any way
  // (Ctrl-C, kill -9) before stop(), the pipe closes, `read` returns, and it stops the server group
  // and removes the case's temp dir.
  const watchdog = spawn(
    "sh",
    ["-c", `read _ ; kill -TERM -${pgid} 2>/dev/null; sleep 3; kill -KILL -${pgid} 2>/dev/null; rm -rf '${c.tmpRoot}'`],
    { detached: true, stdio: ["pipe", "ignore", "ignore"] },
  )
  watchdog.stdin.unref?.()
  watchdog.unref()
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    killGroup(pgid)
    try {
      process.kill(-watchdog.pid, "SIGKILL")
    } catch {}
  }
  const base = `http://127.0.0.1:${port}`
  const command = `opencode ${args.join(" ").replace(String(port), "<port>")}`
  let healthy = false
  const deadline = t0 + healthSeconds * 1000
  while (!healthy && now() < deadline) {
    const h = curl(`${base}/global/health`, 2)
    healthy = h.status === 200 && h.json?.healthy === true
    if (!healthy) sleep(250)
  }
  if (!healthy) {
    stop()
    throw new Error(`server did not become healthy in ${healthSeconds} s; stderr: ${fs.readFileSync(stderrFile, "utf8").slice(-2000)}`)
  }
  return { base, port, pgid, command, ready_ms: now() - t0, stderrFile, stop }
}

module.exports = { freePort, curl, startServer, killGroup, sleep }
