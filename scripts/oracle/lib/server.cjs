// A real `opencode serve` for one prepared case (see discovery.cjs prepareCase): start it in its own
// process group, wait for /global/health, query it with bounded curl calls, stop the whole group.
// Used by scripts/oracle/record-tool-schemas. A watchdog stops the server if the recorder dies first.
"use strict"

const fs = require("node:fs")
const path = require("node:path")
const { spawn, spawnSync } = require("node:child_process")
const { OPENCODE, now } = require("./discovery.cjs")

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

function freePort() {
  const r = spawnSync(process.execPath, [
    "-e",
    "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})",
  ], { encoding: "utf8" })
  return Number(r.stdout.trim())
}

/** curl with a hard time limit (-m). Returns { status, body, json }; status 0 = no answer. */
function curl(url, seconds, { method = "GET", body } = {}) {
  const args = ["-s", "-m", String(seconds), "-X", method, "-w", "\n%{http_code}"]
  if (body !== undefined) args.push("-H", "content-type: application/json", "--data-binary", JSON.stringify(body))
  args.push(url)
  const r = spawnSync("curl", args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
  const text = r.stdout ?? ""
  const i = text.lastIndexOf("\n")
  const status = Number(text.slice(i + 1)) || 0
  const raw = text.slice(0, i)
  let json
  try {
    json = JSON.parse(raw)
  } catch {}
  return { status, body: raw, json }
}

// Live (non-zombie) members of a process group, from /proc (Linux).
function groupAlive(pgid) {
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${p}/stat`, "utf8")
    } catch {
      continue
    }
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(f[2]) === pgid && f[0] !== "Z") return true
  }
  return false
}

function killGroup(pgid) {
  const signal = (sig) => {
    try {
      process.kill(-pgid, sig)
    } catch {}
  }
  signal("SIGTERM")
  for (let i = 0; i < 50 && groupAlive(pgid); i++) sleep(100)
  if (groupAlive(pgid)) signal("SIGKILL")
  for (let i = 0; i < 20 && groupAlive(pgid); i++) sleep(100)
}

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
