// Small process and HTTP helpers shared by the oracle recorders (Linux): a synchronous sleep,
// a free loopback port, curl with a hard time limit, and stopping a whole process group.
"use strict"

const fs = require("node:fs")
const { spawnSync } = require("node:child_process")

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** A free TCP port on 127.0.0.1 (found synchronously by a child node process). */
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

// Live (non-zombie) members of a process group, from /proc. Zombies count as gone: while a
// recorder blocks synchronously, node cannot reap its child, so kill(-pgid, 0) alone would not do.
function groupAlive(pgid) {
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${p}/stat`, "utf8")
    } catch {
      continue
    }
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ") // state ppid pgrp ...
    if (Number(f[2]) === pgid && f[0] !== "Z") return true
  }
  return false
}

/** SIGTERM to the group, SIGKILL after 5 s, wait (bounded) until it is gone. */
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

/** The JSON lines of `file` ([] when it does not exist). */
function readJsonLines(file) {
  if (!fs.existsSync(file)) return []
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
}

module.exports = { sleep, freePort, curl, groupAlive, killGroup, readJsonLines }
