// Start scripts/oracle/lib/mock-model.cjs as a child process for a recorder and stop it again.
// The mock gets a pipe as stdin and --exit-on-stdin-close, so it also ends when the recorder dies; it has a
// bounded lifetime of its own (MOCK_MAX_SECONDS) as well.
"use strict"

const fs = require("node:fs")
const path = require("node:path")
const { spawn } = require("node:child_process")
const { killGroup, sleep, readJsonLines } = require("./proc.cjs")

const MOCK = path.join(__dirname, "mock-model.cjs")

/** Returns { port, pid, logFile, stop() }. The log is JSON lines of every request the mock got. */
function startMock(dir, { maxSeconds = 300, maxRequests = 200, waitSeconds = 10 } = {}) {
  const portFile = path.join(dir, "mock.port")
  const logFile = path.join(dir, "mock-requests.jsonl")
  const errFile = path.join(dir, "mock.err")
  const child = spawn(process.execPath, [MOCK, "--port", "0", "--port-file", portFile, "--exit-on-stdin-close"], {
    env: {
      PATH: process.env.PATH,
      MOCK_LOG: logFile,
      MOCK_MAX_SECONDS: String(maxSeconds),
      MOCK_MAX_REQUESTS: String(maxRequests),
    },
    detached: true,
    stdio: ["pipe", "ignore", fs.openSync(errFile, "w")],
  })
  child.unref()
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    try {
      child.stdin.end()
    } catch {}
    killGroup(child.pid)
  }
  const deadline = Date.now() + waitSeconds * 1000
  while (!fs.existsSync(portFile) && Date.now() < deadline) sleep(50)
  const port = fs.existsSync(portFile) ? Number(fs.readFileSync(portFile, "utf8")) : 0
  if (!port) {
    stop()
    throw new Error(`mock model did not start in ${waitSeconds} s: ${fs.readFileSync(errFile, "utf8").slice(-1000)}`)
  }
  return { port, pid: child.pid, logFile, stop }
}


module.exports = { startMock, readJsonLines }
