// Shared code for scripts/bench-vs-opencode: start the real OpenCode 1.18.4 (`opencode serve`) and
// Berth (`berth serve`, `berth tools`) on the same isolated cases, time each from spawning the
// process to the first answer that lists the expected tools, and read their memory from /proc.
//
// Every process is started in its own process group and registered with a Reaper, whose watchdog
// (a detached `sh` holding a pipe from this process) stops the registered groups, every process whose
// environment names the bench's temp root, and removes that root if the bench dies before cleaning up.
"use strict"

const fs = require("node:fs")
const os = require("node:os")
const path = require("node:path")
const http = require("node:http")
const { spawn } = require("node:child_process")
const lib = require("./discovery.cjs")
const { freePort, killGroup, groupAlive } = require("./proc.cjs")

const ROOT = lib.ROOT
const BERTH = path.resolve(process.env.BERTH_BIN ?? path.join(ROOT, "target", "release", "berth"))
// Prepared npm plugin packages shared by Berth data dirs (as tests/cli/corpus.rs uses them).
const BERTH_PACKAGES = path.join(ROOT, ".tools", "corpus-cache", "berth-packages")
const PROVIDER = "mock"
const MODEL = "mock-model"
const POLL_MS = 20

const delay = (ms) => new Promise((r) => setTimeout(r, ms))
const nowMs = () => Number(process.hrtime.bigint()) / 1e6

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

// --- /proc ---------------------------------------------------------------------------------------

function procStat(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ") // state ppid pgrp ...
    // utime and stime (fields 14 and 15 of stat), in clock ticks, over all the process's threads.
    return { state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), ticks: Number(f[11]) + Number(f[12]) }
  } catch {
    return undefined
  }
}

const allPids = () => fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p)).map(Number)

/** VmRSS of one process in bytes (0 when it is gone or a zombie). */
function pidRss(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) * 1024 : 0
  } catch {
    return 0
  }
}

/** CPU time (clock ticks) used so far by the live members of a process group. */
function groupTicks(pgid) {
  let ticks = 0
  for (const pid of allPids()) {
    const st = procStat(pid)
    if (st && st.pgrp === pgid && st.state !== "Z") ticks += st.ticks
  }
  return ticks
}

/** Clock ticks per second (`getconf CLK_TCK`; 100 on Linux). */
const CLK_TCK = (() => {
  try {
    return Number(require("node:child_process").execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/** Sum of VmRSS over the live members of a process group, and how many there are. */
function groupRss(pgid) {
  let bytes = 0
  let procs = 0
  for (const pid of allPids()) {
    const st = procStat(pid)
    if (!st || st.pgrp !== pgid || st.state === "Z") continue
    bytes += pidRss(pid)
    procs++
  }
  return { bytes, procs }
}

/** Processes (not this one, nor those of `except`) whose environment, command line or cwd names `root`. */
function processesUnder(root, except = []) {
  const out = []
  for (const pid of allPids()) {
    if (pid === process.pid || except.includes(pid)) continue
    let hit = false
    for (const f of ["environ", "cmdline"]) {
      try {
        if (fs.readFileSync(`/proc/${pid}/${f}`).includes(root)) hit = true
      } catch {}
    }
    try {
      if (fs.readlinkSync(`/proc/${pid}/cwd`).startsWith(root)) hit = true
    } catch {}
    const st = procStat(pid)
    if (hit && st && st.state !== "Z") {
      let cmd = ""
      try {
        cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()
      } catch {}
      out.push({ pid, pgid: st.pgrp, cmd })
    }
  }
  return out
}

// --- the reaper ----------------------------------------------------------------------------------

class Reaper {
  constructor(root) {
    this.root = root
    this.list = path.join(root, ".pgids")
    fs.writeFileSync(this.list, "")
    const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`
    // Runs only when the pipe closes: this process exited (normally or not) without stop().
    const script =
      `read _; L=${q(this.list)}; R=${q(root)}; ` +
      `for g in $(cat "$L" 2>/dev/null); do kill -TERM -"$g" 2>/dev/null; done; sleep 3; ` +
      `for g in $(cat "$L" 2>/dev/null); do kill -KILL -"$g" 2>/dev/null; done; ` +
      `for p in /proc/[0-9]*; do [ "\${p#/proc/}" = "$$" ] && continue; ` +
      `grep -qsF "$R" "$p/environ" && kill -KILL "\${p#/proc/}" 2>/dev/null; done; rm -rf "$R"`
    const env = { PATH: process.env.PATH }
    this.watchdog = spawn("sh", ["-c", script], { detached: true, stdio: ["pipe", "ignore", "ignore"], env })
    this.watchdog.stdin.unref?.()
    this.watchdog.unref()
    this.groups = new Set()
  }
  add(pgid) {
    if (!pgid || this.groups.has(pgid)) return
    this.groups.add(pgid)
    fs.appendFileSync(this.list, `${pgid}\n`)
  }
  /** Stops every registered group and every process naming the root; returns what had to be killed. */
  sweep() {
    for (const g of this.groups) if (groupAlive(g)) killGroup(g)
    const left = processesUnder(this.root, [this.watchdog.pid])
    for (const p of left) {
      try {
        process.kill(p.pid, "SIGKILL")
      } catch {}
    }
    return left
  }
  /** Sweep, remove the root, end the watchdog. */
  stop() {
    const left = this.sweep()
    fs.rmSync(this.root, { recursive: true, force: true })
    try {
      process.kill(-this.watchdog.pid, "SIGKILL")
    } catch {}
    return left
  }
}

// --- cases ---------------------------------------------------------------------------------------

/** discovery.cjs prepareCase, with its temp dir under `root` (so the reaper finds everything). */
function caseUnder(root, name, opts) {
  const saved = process.env.TMPDIR
  process.env.TMPDIR = root
  try {
    return lib.prepareCase(name, opts)
  } finally {
    if (saved === undefined) delete process.env.TMPDIR
    else process.env.TMPDIR = saved
  }
}

/** The env of a case that may reach the configured npm registry and uses the persistent caches. */
function withRealRegistry(c) {
  delete c.env.npm_config_registry
  delete c.env.npm_config_fetch_retries
  for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "NODE_EXTRA_CA_CERTS"])
    if (process.env[k]) c.env[k] = process.env[k]
  return c
}

// --- OpenCode ------------------------------------------------------------------------------------

/**
 * GET `url` on a fresh connection (no keep-alive pool: a request the server left hanging while it
 * started must not hold up the next one). Resolves { status, json, text }; status 0 = no answer.
 */
function fetchJson(url, { timeoutMs = 120000, headers = {} } = {}) {
  return new Promise((resolve) => {
    let done = false
    const finish = (v) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(v)
    }
    const req = http.get(url, { agent: false, headers: { ...headers, connection: "close" } }, (res) => {
      const chunks = []
      res.on("data", (d) => chunks.push(d))
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8")
        let json
        try {
          json = JSON.parse(text)
        } catch {}
        finish({ status: res.statusCode, json, text })
      })
      res.on("error", (error) => finish({ status: 0, error }))
    })
    req.on("error", (error) => finish({ status: 0, error }))
    const timer = setTimeout(() => {
      req.destroy()
      finish({ status: 0, error: new Error("timeout") })
    }, timeoutMs)
  })
}

const missingFrom = (expected, names) => {
  const have = new Set(names)
  return expected.filter((n) => !have.has(n))
}

/**
 * Spawn `opencode serve` for case `c`, wait until GET /global/health answers, then for the first
 * GET /experimental/tool that lists every name of `expected`. Returns { ms, pgid, stop(), rss() }.
 */
async function openCodeUntilTools(c, expected, reaper, { timeoutMs = 120000, tag = "oc" } = {}) {
  const port = freePort()
  const base = `http://127.0.0.1:${port}`
  const url = `${base}/experimental/tool?directory=${encodeURIComponent(c.directory)}&provider=${PROVIDER}&model=${MODEL}`
  const errFile = path.join(c.tmpRoot, `${tag}.err`)
  const args = ["serve", "--port", String(port), "--hostname", "127.0.0.1", "--print-logs"]
  const t0 = nowMs()
  const child = spawn(lib.OPENCODE, args, {
    cwd: c.directory,
    env: c.env,
    detached: true,
    stdio: ["ignore", "ignore", fs.openSync(errFile, "w")],
  })
  reaper.add(child.pid)
  let exited = null
  child.on("exit", (code, signal) => (exited = { code, signal }))
  const pgid = child.pid
  const stop = () => killGroup(pgid)
  const deadline = t0 + timeoutMs
  let missing = expected
  let ms
  // /global/health first: a tool request sent while the server is still starting can hang for good.
  let healthy = false
  while (!healthy && nowMs() < deadline && !exited) {
    const h = await fetchJson(`${base}/global/health`, { timeoutMs: 2000 })
    healthy = h.status === 200 && h.json?.healthy === true
    if (!healthy) await delay(POLL_MS)
  }
  while (healthy && nowMs() < deadline && !exited) {
    const r = await fetchJson(url, { timeoutMs: Math.max(1, deadline - nowMs()) })
    if (r.status === 200 && Array.isArray(r.json)) {
      missing = missingFrom(expected, r.json.map((t) => t.id))
      if (!missing.length) {
        ms = nowMs() - t0
        break
      }
    }
    await delay(POLL_MS)
  }
  if (ms === undefined) {
    const why =
      `opencode serve did not list ${missing.length} expected tools (e.g. ${missing.slice(0, 3).join(", ")}) ` +
      `within ${timeoutMs} ms${exited ? ` (exited ${JSON.stringify(exited)})` : ""}${healthy ? "" : " (never healthy)"}`
    stop()
    throw new Error(`${why}; stderr tail: ${fs.readFileSync(errFile, "utf8").slice(-1500)}`)
  }
  return { ms, pgid, stop, rss: () => groupRss(pgid), ticks: () => ({ all: groupTicks(pgid) }) }
}

// --- Berth ---------------------------------------------------------------------------------------

function berthArgs(m, args) {
  return [...args, "--data-dir", m.data, "--project", m.directory]
}

/** Run the berth CLI to completion in its own process group: { code, stdout, stderr, ms, json }. */
function berthRun(m, args, reaper) {
  return new Promise((resolve, reject) => {
    const t0 = nowMs()
    const child = spawn(BERTH, berthArgs(m, args), { cwd: m.directory, env: m.env, detached: true, stdio: ["ignore", "pipe", "pipe"] })
    reaper.add(child.pid)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-20000)))
    child.on("error", reject)
    child.on("close", (code) => {
      const ms = nowMs() - t0
      let json
      try {
        json = JSON.parse(stdout)
      } catch {}
      resolve({ code, stdout, stderr, ms, json })
    })
  })
}

/**
 * Approve everything through activation (untimed set-up): `berth approve --all` + `berth tools --json`,
 * repeated until the tools list names all of `expected`, every source is allowed and none waits
 * for a decision. (The sources' `state` of a one-shot CLI is `discovered`, not `active`: activation
 * lives in the process that loaded them.)
 */
async function berthApproveThroughActivation(m, expected, reaper) {
  let last
  for (let round = 0; round < 8; round++) {
    const a = await berthRun(m, ["approve", "--all", "--json"], reaper)
    if (a.code !== 0) throw new Error(`berth approve --all failed: ${a.stdout}${a.stderr.slice(-1500)}`)
    const t = await berthRun(m, ["tools", "--json"], reaper)
    const s = await berthRun(m, ["sources", "--json"], reaper)
    const names = (t.json?.tools ?? []).map((x) => x.name)
    const missing = missingFrom(expected, names)
    const sources = s.json?.sources ?? []
    const waiting = sources.filter((x) => x.approval?.decision !== "allow" || String(x.state).startsWith("pending"))
    last = { missing, waiting: waiting.map((x) => `${x.id}:${x.state}`), problems: t.json?.problems }
    if (t.code === 0 && !missing.length && !waiting.length) return
  }
  throw new Error(`berth set-up did not reach activation: ${JSON.stringify(last).slice(0, 2000)}`)
}

/**
 * Spawn `berth serve --json` for machine `m`, read the URL (token) it prints, poll GET /api/status until
 * its `tools` names all of `expected`. Returns { ms, pid, stop(), rss() }.
 */
async function berthServeUntilTools(m, expected, reaper, { timeoutMs = 60000 } = {}) {
  const t0 = nowMs()
  const child = spawn(BERTH, berthArgs(m, ["serve", "--json"]), {
    cwd: m.directory,
    env: m.env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  })
  reaper.add(child.pid)
  const pid = child.pid
  let exited = null
  const exit = new Promise((r) =>
    child.on("exit", (code, signal) => {
      exited = { code, signal }
      r()
    }),
  )
  let stderr = ""
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-20000)))
  let hostPids = []
  const stop = async () => {
    if (!exited) {
      try {
        process.kill(-pid, "SIGTERM")
      } catch {}
      await Promise.race([exit, delay(5000)])
      if (!exited) killGroup(pid)
    }
    // Hosts live in their own process groups; serve stops them on SIGTERM. Anything left is ended.
    for (const h of hostPids) if (groupAlive(h)) killGroup(h)
  }
  const deadline = t0 + timeoutMs
  const url = await new Promise((resolve) => {
    let out = ""
    const timer = setTimeout(() => resolve(undefined), timeoutMs)
    child.stdout.on("data", (d) => {
      out += d
      let j
      try {
        j = JSON.parse(out)
      } catch {
        return
      }
      clearTimeout(timer)
      child.stdout.removeAllListeners("data")
      child.stdout.resume()
      resolve(j?.serve?.url)
    })
    child.on("exit", () => resolve(undefined))
  })
  if (!url) {
    await stop()
    throw new Error(`berth serve printed no URL${exited ? ` (exited ${JSON.stringify(exited)})` : ""}; stderr: ${stderr.slice(-1500)}`)
  }
  const u = new URL(url)
  const headers = { authorization: `Bearer ${u.searchParams.get("token")}` }
  let missing = expected
  let ms
  let snapshot
  while (nowMs() < deadline && !exited) {
    const r = await fetchJson(`${u.origin}/api/status`, { headers, timeoutMs: Math.max(1, deadline - nowMs()) })
    if (r.status === 200 && r.json) {
      snapshot = r.json
      hostPids = (r.json.hosts ?? []).map((h) => h.pid)
      for (const h of hostPids) reaper.add(h)
      missing = missingFrom(expected, (r.json.tools ?? []).map((t) => t.name))
      if (!missing.length) {
        ms = nowMs() - t0
        break
      }
    }
    await delay(POLL_MS)
  }
  if (ms === undefined) {
    const states = (snapshot?.sources ?? []).map((s) => `${s.id}:${s.state}`).join(", ")
    const why =
      `berth serve did not list ${missing.length} expected tools (e.g. ${missing.slice(0, 3).join(", ")}) within ` +
      `${timeoutMs} ms${exited ? ` (exited ${JSON.stringify(exited)})` : ""}; hosts: ${hostPids.length}; sources: ${states}`
    await stop()
    throw new Error(why)
  }
  // Memory: this serve process plus every host's process group (fresh status for the host list).
  const rss = async () => {
    const r = await fetchJson(`${u.origin}/api/status`, { headers, timeoutMs: 10000 })
    if (r.status === 200 && r.json) {
      hostPids = (r.json.hosts ?? []).map((h) => h.pid)
      for (const h of hostPids) reaper.add(h)
    }
    let hosts = 0
    let hostProcs = 0
    for (const h of hostPids) {
      const g = groupRss(h)
      hosts += g.bytes
      hostProcs += g.procs
    }
    const serve = pidRss(pid)
    return { serve, hosts, total: serve + hosts, hostCount: hostPids.length, hostProcs }
  }
  // CPU time of this serve process and the hosts `rss()` last saw (no request: asking costs CPU).
  const ticks = () => ({
    serve: procStat(pid)?.ticks ?? 0,
    hosts: hostPids.reduce((t, h) => t + groupTicks(h), 0),
  })
  return { ms, pid, stop, rss, ticks }
}

module.exports = {
  CLK_TCK,
  groupTicks,
  ROOT,
  BERTH,
  BERTH_PACKAGES,
  PROVIDER,
  MODEL,
  delay,
  nowMs,
  median,
  pidRss,
  groupRss,
  processesUnder,
  Reaper,
  caseUnder,
  withRealRegistry,
  berthRun,
  berthApproveThroughActivation,
  berthServeUntilTools,
  openCodeUntilTools,
}
