// What the browser tests share: a scratch machine, the berth CLI, `berth serve`, chromium and
// a few waits on the page. Not a test file itself: `node --test` does not pick it up.
import assert from "node:assert/strict"
import { spawn, execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { createInterface } from "node:readline"
import { chromium } from "playwright-core"

const here = dirname(fileURLToPath(import.meta.url))
/** The repository's root folder. */
export const repo = resolve(here, "..", "..")
/** The berth binary under test: BERTH_BIN, or target/debug/berth of this repository. */
export const berthBin = resolve(process.env.BERTH_BIN ?? join(here, "..", "..", "target", "debug", "berth"))
/** Where screenshots go: <repo>/test-artifacts/. */
export const artifacts = join(repo, "test-artifacts")
/** The chromium to drive: CHROMIUM_BIN, or Debian's /usr/bin/chromium. */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium"
/** How long one step may wait for the page or the server, in ms. */
export const WAIT = 15_000

// Servers still running when this process ends (a crash between hooks) are killed too.
const running = new Set()
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/** A scratch machine: HOME with XDG folders inside it, a git project, a data dir; OpenCode's variables cleared. */
export function scratchMachine(name) {
  const root = mkdtempSync(join(tmpdir(), `berth-e2e-${name}-`))
  const home = join(root, "home")
  const project = join(root, "project")
  const data = join(root, "data")
  mkdirSync(home, { recursive: true })
  mkdirSync(project, { recursive: true })
  execFileSync("git", ["init", "-q", project])
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith("OPENCODE_") || k.startsWith("XDG_")) continue
    env[k] = v
  }
  Object.assign(env, {
    // The plugin host's code of this repository (a binary built into a CARGO_TARGET_DIR outside
    // the repository does not find it above itself).
    BERTH_HOST_DIR: process.env.BERTH_HOST_DIR ?? join(repo, "host"),
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    XDG_CACHE_HOME: join(home, ".cache"),
  })
  return { root, home, project, data, env, globalDir: join(home, ".config", "opencode") }
}

/** Writes a file, creating its folder first. */
export function write(path, text) {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, text)
}

/** The real CLI on the same machine (HOME, data dir, project): returns what it printed. */
export function berthText(machine, args) {
  return execFileSync(berthBin, [...args, "--data-dir", machine.data, "--project", machine.project], {
    env: machine.env,
    cwd: machine.project,
    encoding: "utf8",
  })
}

/** The real CLI on the same machine with `--json`: returns the parsed answer. */
export function berth(machine, args) {
  return JSON.parse(berthText(machine, [...args, "--json"]))
}

/** Starts `berth serve --json` and resolves with { child, url, origin, token, stderr } once it printed its URL. */
export function startServe(machine) {
  assert.ok(existsSync(berthBin), `no berth binary at ${berthBin}: run \`cargo build -p berth-cli\` or set BERTH_BIN`)
  const child = spawn(
    berthBin,
    ["serve", "--json", "--data-dir", machine.data, "--project", machine.project],
    { env: machine.env, cwd: machine.project, stdio: ["ignore", "pipe", "pipe"] },
  )
  running.add(child)
  child.once("exit", () => running.delete(child))
  let stdout = ""
  let stderr = ""
  child.stderr.on("data", (chunk) => {
    stderr = (stderr + chunk).slice(-20_000)
  })
  return new Promise((resolvePromise, reject) => {
    const fail = (message) => {
      clearTimeout(timer)
      child.kill("SIGKILL") // never leave a server behind: it would also keep this process alive
      reject(new Error(`${message}\nstdout: ${stdout}\nstderr: ${stderr}`))
    }
    const timer = setTimeout(() => fail(`berth serve printed no URL within ${WAIT} ms`), WAIT)
    child.on("error", (e) => fail(`cannot start ${berthBin}: ${e.message}`))
    child.on("exit", (code, signal) => fail(`berth serve exited early (${code ?? signal})`))
    child.stdout.on("data", (chunk) => {
      stdout += chunk
      // `--json` prints one JSON document (pretty-printed over several lines).
      let parsed
      try {
        parsed = JSON.parse(stdout)
      } catch {
        return
      }
      const url = parsed?.serve?.url
      if (typeof url !== "string") return fail("berth serve printed JSON without serve.url")
      clearTimeout(timer)
      child.removeAllListeners("exit")
      child.stdout.removeAllListeners("data")
      child.stdout.resume()
      const u = new URL(url)
      resolvePromise({ child, url, origin: u.origin, token: u.searchParams.get("token"), stderr: () => stderr })
    })
  })
}

/**
 * Stops a server from startServe: SIGTERM, then SIGKILL if it has not exited within 30 s. On
 * SIGTERM the server lets a dependency install it started (npm, into the data dir) finish first;
 * killed sooner, that install would go on writing while the scratch machine is removed.
 */
export async function stopServe(server) {
  const child = server?.child
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once("exit", r))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
  await exited
  clearTimeout(timer)
}

/** Launches headless chromium with the options these tests need (no sandbox, no GPU, no background traffic). */
export function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  })
}

/** Collects page errors and console errors so a broken script fails the test visibly. */
export function watchPage(page) {
  const problems = []
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`)
  })
  return problems
}

/** Collects the URLs of the page's requests to /api/ (there should be none behind the Tauri bridge). */
export function watchApiRequests(page) {
  const apiRequests = []
  page.on("request", (r) => {
    if (new URL(r.url()).pathname.startsWith("/api/")) apiRequests.push(r.url())
  })
  return apiRequests
}

/** Opens a new page at `url`, watched by watchPage, and waits until it is ready: resolves with { page, problems }. */
export async function openPage(browser, url, viewport) {
  const page = await browser.newPage({ viewport })
  const problems = watchPage(page)
  await page.goto(url)
  await page.waitForSelector("body[data-ready='1']", { timeout: WAIT })
  return { page, problems }
}

/** Closes the browser, stops the server and removes the scratch machine (each only if it exists). */
export async function tearDown({ browser, server, machine }) {
  await browser?.close().catch(() => {})
  await stopServe(server)
  if (machine) rmSync(machine.root, { recursive: true, force: true })
}

/** GET /api/status with the server's token: the raw response. */
export function fetchStatus(server) {
  return fetch(`${server.origin}/api/status`, { headers: { authorization: `Bearer ${server.token}` } })
}

/** GET /api/status with the server's token: asserts 200 and returns the snapshot. */
export async function fetchSnapshot(server) {
  const res = await fetchStatus(server)
  assert.equal(res.status, 200)
  return res.json()
}

/** Saves a full-page screenshot as <repo>/test-artifacts/<name> and returns its path. */
export async function saveScreenshot(page, name) {
  mkdirSync(artifacts, { recursive: true })
  const path = join(artifacts, name)
  await page.screenshot({ path, fullPage: true })
  return path
}

/** A source's row (card) on the page. */
export function sourceRow(page, id) {
  return page.locator(`[data-testid=source][data-source-id="${id}"]`)
}

/** Waits until the page shows the server's snapshot (at least revision `rev`). */
export function waitForRevision(page, rev, timeout = WAIT) {
  return page.waitForFunction((r) => Number(document.body.dataset.revision) >= r, rev, { timeout })
}

/** Waits until the header's pending badge counts exactly `n`. */
export function waitForBadgeCount(page, n, timeout = WAIT) {
  return page.waitForFunction(
    (count) => document.querySelector("[data-testid=pending-badge]").dataset.count === String(count),
    n,
    { timeout },
  )
}

/**
 * Stands in for withGlobalTauri on `page`: `invoke('status')` answers `snapshot` (and `projects` its
 * project), `listen` records
 * handlers and `window.__emitTauri(name, payload)` fires them. Any other command is refused, or with
 * `hold` recorded in `window.__invokes` and left for the test to settle through `window.__answers[cmd]`.
 */
export function stubTauriBridge(page, snapshot, { hold = false } = {}) {
  return page.addInitScript(
    ({ snapshot, hold }) => {
      const listeners = []
      window.__invokes = []
      window.__answers = {}
      window.__TAURI__ = {
        core: {
          invoke: (cmd, args) => {
            if (cmd === "status") return Promise.resolve(snapshot)
            // The window's project picker asks at start: the snapshot's project, nothing recent.
            if (cmd === "projects") return Promise.resolve({ current: snapshot.project?.directory ?? null, recent: [] })
            if (!hold) return Promise.reject(new Error(`unknown command ${cmd}`))
            window.__invokes.push({ cmd, args })
            return new Promise((resolve, reject) => {
              window.__answers[cmd] = { resolve, reject }
            })
          },
        },
        event: {
          listen: async (name, handler) => {
            listeners.push({ name, handler })
            return () => {}
          },
        },
      }
      window.__emitTauri = (name, payload) => {
        for (const l of listeners) if (l.name === name) l.handler({ event: name, id: 1, payload })
      }
    },
    { snapshot, hold },
  )
}

/**
 * Approves every waiting source of `machine` the way a person does with the CLI: one decision per
 * source (`berth approve --all`), then `berth tools` loads them and they register what they
 * contribute; nothing is asked a second time. Returns the ids approved.
 */
export function approveAndLoad(machine) {
  const waiting = berth(machine, ["status"]).sources.filter((s) => s.state === "pending-approval")
  const approved = berth(machine, ["approve", "--all"]).approved
  assert.deepEqual([...approved].sort(), waiting.map((s) => s.id).sort(), "approve --all approved what was waiting")
  berthText(machine, ["tools"])
  const left = berth(machine, ["status"]).sources.filter(
    (s) => s.state === "pending-approval" || s.state === "pending-activation",
  )
  assert.deepEqual(left.map((s) => `${s.id}: ${s.state}`), [], "a source was asked a second time after one approval")
  return approved
}

/** POST /api/<path> with the server's token and a JSON body: resolves with { status, body }. */
export async function postApi(server, path, body) {
  const res = await fetch(`${server.origin}/api/${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify(body ?? {}),
  })
  const text = await res.text()
  let parsed
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = text
  }
  return { status: res.status, body: parsed }
}

/** The loopback test registry with `visible` published: resolves with { url, publish(spec), stop() }. */
export function startRegistry(visible) {
  const child = spawn(
    process.execPath,
    [join(repo, "tests/support/registry.mjs"), "--root", join(repo, "fixtures/registry"), "--visible", visible.join(",")],
    { stdio: ["pipe", "pipe", "inherit"] },
  )
  return new Promise((resolve, reject) => {
    child.once("error", reject)
    createInterface({ input: child.stdout }).once("line", (line) => {
      const { port } = JSON.parse(line)
      const url = `http://127.0.0.1:${port}/`
      resolve({
        url,
        publish: async (spec) => {
          const res = await fetch(`${url}-/berth/publish`, { method: "POST", body: JSON.stringify({ spec }) })
          assert.equal(res.status, 200, `publish ${spec}`)
        },
        stop: () => child.kill("SIGKILL"),
      })
    })
  })
}
