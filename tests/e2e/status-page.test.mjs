// Berth's status page in a real browser (Debian's chromium through playwright-core).
//
// Builds nothing: it runs the berth binary from BERTH_BIN (default: target/debug/berth of this
// repository) as `berth serve --json` on a scratch machine (its own HOME, XDG folders and a
// git-initialised project; OpenCode's variables cleared), opens the URL it prints, and checks
// what a person sees. Screenshots go to <repo>/test-artifacts/.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { spawn, execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"

const here = dirname(fileURLToPath(import.meta.url))
const repo = resolve(here, "..", "..")
const berthBin = resolve(process.env.BERTH_BIN ?? join(here, "..", "..", "target", "debug", "berth"))
const artifacts = join(repo, "test-artifacts")
const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium"
const WAIT = 15_000

// Servers still running when this process ends (a crash between hooks) are killed too.
const running = new Set()
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

/** A scratch machine: HOME with XDG folders inside it, a git project, a data dir. */
function scratchMachine(name) {
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
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    XDG_CACHE_HOME: join(home, ".cache"),
  })
  return { root, home, project, data, env, globalDir: join(home, ".config", "opencode") }
}

function write(path, text) {
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, text)
}

/** Starts `berth serve --json` and resolves with { child, url, origin, token } once it printed its URL. */
function startServe(machine) {
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

async function stopServe(server) {
  const child = server?.child
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once("exit", r))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000)
  await exited
  clearTimeout(timer)
}

async function launchBrowser() {
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
function watchPage(page) {
  const problems = []
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`)
  })
  return problems
}

describe("status page on an empty machine, then live", () => {
  let machine
  let server
  let browser
  let page
  let problems

  before(async () => {
    machine = scratchMachine("empty")
    server = await startServe(machine)
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1024, height: 768 } })
    problems = watchPage(page)
    await page.goto(server.url)
    await page.waitForSelector("body[data-ready='1']", { timeout: WAIT })
  })

  after(async () => {
    await browser?.close().catch(() => {})
    await stopServe(server)
    if (machine) rmSync(machine.root, { recursive: true, force: true })
  })

  test("shows the empty state and the config folders derived from this HOME", async () => {
    const empty = page.getByTestId("empty-state")
    await empty.waitFor({ state: "visible", timeout: WAIT })
    assert.match(await empty.innerText(), /No OpenCode plugins or tools were found/)
    assert.match(await page.getByTestId("summary").innerText(), /Nothing waiting for approval/)
    assert.equal(await page.getByTestId("pending-badge").getAttribute("data-count"), "0")
    assert.equal(await page.getByTestId("pending-badge").isVisible(), false)

    // The folder list is open on an empty machine and names the folder under our own HOME.
    const row = page.locator(`[data-testid=config-dir][data-path="${machine.globalDir}"]`)
    await row.waitFor({ state: "visible", timeout: WAIT })
    assert.ok((await row.innerText()).includes(machine.globalDir))
    assert.ok((await page.getByTestId("config-dirs").innerText()).includes(machine.globalDir))
    assert.equal(await page.getByTestId("source-list").count(), 0)

    // The always-present sections and the live connection.
    await page.getByTestId("config-files").waitFor({ state: "attached", timeout: WAIT })
    await page.locator("[data-testid=live][data-live=connected]").waitFor({ timeout: WAIT })
    assert.match(await page.getByTestId("footer").innerText(), new RegExp(escapeRe(machine.data)))
    assert.deepEqual(problems, [])
    mkdirSync(artifacts, { recursive: true })
    await page.screenshot({ path: join(artifacts, "status-page-empty.png"), fullPage: true })
  })

  test("the API refuses a request without the token", async () => {
    const bare = await fetch(`${server.origin}/api/status`)
    assert.equal(bare.status, 401)
    const wrong = await fetch(`${server.origin}/api/status`, { headers: { authorization: "Bearer nope" } })
    assert.equal(wrong.status, 401)
    const events = await fetch(`${server.origin}/api/events`)
    assert.equal(events.status, 401)
    const ok = await fetch(`${server.origin}/api/status`, { headers: { authorization: `Bearer ${server.token}` } })
    assert.equal(ok.status, 200)
    const snap = await ok.json()
    assert.ok(snap.config_dirs.some((d) => d.path === machine.globalDir))
  })

  test("without a valid token the page says how to get in", async () => {
    const other = await browser.newPage({ viewport: { width: 1024, height: 768 } })
    try {
      await other.goto(`${server.origin}/`)
      await other.getByTestId("load-error").waitFor({ state: "visible", timeout: WAIT })
      assert.match(await other.getByTestId("load-error").innerText(), /berth serve/)
      await other.goto(`${server.origin}/?token=wrong`)
      const refused = other.locator("[data-testid=load-error]", { hasText: "Access refused" })
      await refused.waitFor({ state: "visible", timeout: WAIT })
      assert.equal(await other.getByTestId("live").getAttribute("data-live"), "disconnected")
      assert.equal(await other.locator("[data-testid=source]").count(), 0)
    } finally {
      await other.close()
    }
  })

  test("a new plugin file appears on the page by itself", async () => {
    const before = Number(await page.evaluate(() => document.body.dataset.revision))
    await page.evaluate(() => {
      window.__berthNoReload = true
    })
    const file = join(machine.globalDir, "plugins", "live.ts")
    write(file, "export const Live = async () => ({})\n")

    const row = page.locator("[data-testid=source]", {
      has: page.locator("[data-testid=source-entry]", { hasText: file }),
    })
    await row.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await row.getAttribute("data-state"), "pending-approval")
    assert.match(await row.getByTestId("state").innerText(), /Waiting for approval/)
    assert.ok((await row.getAttribute("data-source-id")).length > 0)

    assert.equal(await page.evaluate(() => window.__berthNoReload), true, "the page was reloaded")
    assert.ok(Number(await page.evaluate(() => document.body.dataset.revision)) > before)
    await page.getByTestId("empty-state").waitFor({ state: "detached", timeout: WAIT })
    assert.match(await page.getByTestId("summary").innerText(), /1 plugin waiting for approval/)
    // The header badge counts it, and the row asks for a decision without blocking the page.
    await page.locator("[data-testid=pending-badge][data-count='1']").waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await row.getByTestId("approval-panel").count(), 1)
    assert.equal(await row.locator("button[data-action]").count(), 3)
    assert.deepEqual(problems, [])
  })

  test("saves a screenshot", async () => {
    mkdirSync(artifacts, { recursive: true })
    const path = join(artifacts, "status-page.png")
    await page.screenshot({ path, fullPage: true })
    assert.ok(existsSync(path))
  })
})

describe("status page with several sources and diagnostics", () => {
  let machine
  let server
  let browser
  let page
  let problems

  before(async () => {
    machine = scratchMachine("sources")
    const g = machine.globalDir
    const p = machine.project
    write(join(g, "plugins", "a.ts"), "export const A = async () => ({})\n")
    write(
      join(g, "plugins", "notify.ts"),
      [
        'import type { Plugin } from "@opencode-ai/plugin"',
        "export const Notify: Plugin = async () => ({",
        "  event: async ({ event }) => {",
        '    if (event.type !== "session.idle") return',
        '    await fetch("https://hooks.example.com/notify", { method: "POST", body: process.env.USER })',
        '    Bun.spawn(["notify-send", "OpenCode is done"])',
        "  },",
        "})",
        "",
      ].join("\n"),
    )
    write(join(g, "plugins", "broken.ts"), "export const Broken = async () => {\n  return { oops: \n")
    write(
      join(g, "plugins", "uses-helper.ts"),
      'import { helper } from "./lib/helper"\nexport const UsesHelper = async () => ({})\n',
    )
    write(
      join(p, ".opencode", "tools", "hello.ts"),
      'import { tool } from "@opencode-ai/plugin"\nexport default tool({ description: "Say hello", args: {}, async execute() { return "hello" } })\n',
    )
    write(join(p, "local", "with-options.ts"), "export const WithOptions = async (_ctx, _opts) => ({})\n")
    write(
      join(p, "opencode.jsonc"),
      [
        "{",
        "  // this project's OpenCode config",
        '  "plugin": ["opencode-wakatime@1.3.9", ["./local/with-options.ts", { "verbose": true }]],',
        '  "mcp": { "docs": { "type": "local", "command": ["docs-mcp"] } },',
        '  "colour": "blue"',
        "}",
        "",
      ].join("\n"),
    )
    server = await startServe(machine)
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    problems = watchPage(page)
    await page.goto(server.url)
    await page.waitForSelector("body[data-ready='1']", { timeout: WAIT })
  })

  after(async () => {
    await browser?.close().catch(() => {})
    await stopServe(server)
    if (machine) rmSync(machine.root, { recursive: true, force: true })
  })

  test("every source of the snapshot has a row with its state, and diagnostics show", async () => {
    const res = await fetch(`${server.origin}/api/status`, { headers: { authorization: `Bearer ${server.token}` } })
    const snap = await res.json()
    assert.ok(snap.sources.length >= 5, `expected the fixture's sources, got ${snap.sources.length}`)
    await page.waitForFunction((rev) => Number(document.body.dataset.revision) >= rev, snap.revision, { timeout: WAIT })

    assert.equal(await page.locator("[data-testid=source]").count(), snap.sources.length)
    for (const s of snap.sources) {
      const row = page.locator(`[data-testid=source][data-source-id="${s.id}"]`)
      assert.equal(await row.getAttribute("data-state"), s.state, s.id)
      assert.equal(await row.getByTestId("source-entry").innerText(), s.entry)
      assert.equal(await row.locator("[data-testid=diagnostic]").count(), s.diagnostics.length, s.id)
    }
    const summary = await page.getByTestId("summary").innerText()
    // "7 plugins and 1 tool waiting for approval": the numbers add up to the snapshot's count.
    assert.match(summary, /waiting for approval$/)
    const said = (summary.match(/\d+/g) ?? []).map(Number).reduce((a, b) => a + b, 0)
    assert.equal(said, snap.counts.pending_approval, summary)

    // A source-level diagnostic shows its code, message and what to do.
    const withDiag = snap.sources.find((s) => s.diagnostics.length > 0)
    const diag = page.locator(`[data-source-id="${withDiag.id}"] [data-testid=diagnostic]`).first()
    const text = await diag.innerText()
    assert.ok(text.includes(withDiag.diagnostics[0].code))
    assert.ok(text.includes(withDiag.diagnostics[0].recovery))
    // The config-level diagnostic (the unknown key) is in the global list.
    if (snap.diagnostics.length) {
      assert.equal(await page.locator("[data-testid=diagnostics] [data-testid=diagnostic]").count(), snap.diagnostics.length)
    }
    assert.deepEqual(problems, [])
  })

  test("uses the Tauri bridge when window.__TAURI__ is present", async () => {
    const res = await fetch(`${server.origin}/api/status`, { headers: { authorization: `Bearer ${server.token}` } })
    const snap = await res.json()
    const tauriPage = await browser.newPage({ viewport: { width: 1024, height: 768 } })
    const apiRequests = []
    tauriPage.on("request", (r) => {
      if (new URL(r.url()).pathname.startsWith("/api/")) apiRequests.push(r.url())
    })
    try {
      // A stand-in for withGlobalTauri: `invoke('status')` and `listen('status-changed')`.
      await tauriPage.addInitScript((snapshot) => {
        const listeners = []
        window.__TAURI__ = {
          core: {
            invoke: async (cmd) => {
              if (cmd === "status") return snapshot
              throw new Error(`unknown command ${cmd}`)
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
      }, snap)
      await tauriPage.goto(`${server.origin}/`) // no token: the bridge needs none
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      assert.equal(await tauriPage.locator("[data-testid=source]").count(), snap.sources.length)
      await tauriPage.locator("[data-testid=live][data-live=connected]").waitFor({ timeout: WAIT })

      // A change event re-renders from its snapshot; an older one arriving late is ignored.
      const gone = snap.sources[0]
      const next = {
        ...snap,
        revision: snap.revision + 1,
        sources: snap.sources.slice(1),
        counts: { ...snap.counts, sources: snap.counts.sources - 1 },
      }
      await tauriPage.evaluate(
        ({ next, gone }) =>
          window.__emitTauri("status-changed", {
            revision: next.revision,
            diff: { added: [], removed: [gone], changed: [] },
            snapshot: next,
          }),
        { next, gone: gone.id },
      )
      await tauriPage.waitForFunction((rev) => document.body.dataset.revision === String(rev), next.revision, {
        timeout: WAIT,
      })
      assert.equal(await tauriPage.locator(`[data-source-id="${gone.id}"]`).count(), 0)
      await tauriPage.evaluate(
        (old) => window.__emitTauri("status-changed", { revision: old.revision, diff: {}, snapshot: old }),
        snap,
      )
      assert.equal(await tauriPage.evaluate(() => document.body.dataset.revision), String(next.revision))
      assert.deepEqual(apiRequests, [], "the page used HTTP although the Tauri bridge was there")
    } finally {
      await tauriPage.close()
    }
  })

  test("saves a screenshot for the README", async () => {
    mkdirSync(artifacts, { recursive: true })
    const path = join(artifacts, "status-page-sources.png")
    await page.screenshot({ path, fullPage: true })
    assert.ok(existsSync(path))
  })
})

describe("tools and plugin hosts once sources are approved with the CLI", () => {
  // Activation starts a real plugin host (Bun) and loads the sources in it: give it room.
  const LOAD_WAIT = 45_000
  let machine
  let server
  let browser
  let page
  let problems
  let pluginId
  let toolId

  const status = async () => {
    const res = await fetch(`${server.origin}/api/status`, { headers: { authorization: `Bearer ${server.token}` } })
    assert.equal(res.status, 200)
    return res.json()
  }
  const approveAll = () =>
    execFileSync(berthBin, ["approve", "--all", "--data-dir", machine.data, "--project", machine.project], {
      env: machine.env,
      cwd: machine.project,
      encoding: "utf8",
    })
  const card = (id) => page.locator(`[data-testid=source][data-source-id="${id}"]`)

  before(async () => {
    machine = scratchMachine("tools")
    write(
      join(machine.globalDir, "plugins", "a.ts"),
      'export default { id: "a", server: async () => ({ "chat.params": async () => {} }) }\n',
    )
    write(
      join(machine.project, ".opencode", "tools", "hello.ts"),
      [
        'import { tool } from "@opencode-ai/plugin"',
        "export default tool({",
        '  description: "hi",',
        '  args: { name: tool.schema.string().describe("who") },',
        "  async execute(a) {",
        '    return "hi " + a.name',
        "  },",
        "})",
        "",
      ].join("\n"),
    )
    server = await startServe(machine)
    const snap = await status()
    pluginId = snap.sources.find((s) => s.kind === "file-plugin")?.id
    toolId = snap.sources.find((s) => s.kind === "standalone-tool")?.id
    assert.ok(pluginId && toolId, JSON.stringify(snap.sources.map((s) => [s.kind, s.id])))
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    problems = watchPage(page)
    await page.goto(server.url)
    await page.waitForSelector("body[data-ready='1']", { timeout: WAIT })
  })

  after(async () => {
    await browser?.close().catch(() => {})
    await stopServe(server)
    if (machine) rmSync(machine.root, { recursive: true, force: true })
  })

  test("before any approval: no tools, no host, and both sections say why", async () => {
    const snap = await status()
    assert.deepEqual(snap.tools, [])
    assert.deepEqual(snap.hosts, [])
    assert.match(await page.getByTestId("tools-empty").innerText(), /No active tools yet — approve a source to load its tools\./)
    assert.match(await page.getByTestId("hosts-empty").innerText(), /No plugin host is running/)
    assert.equal(await page.locator("[data-testid=tool]").count(), 0)
    assert.equal(await page.locator("[data-testid=host]").count(), 0)
  })

  test("approved once, the tool is active and the plugin asks to approve what it registers", async () => {
    assert.match(approveAll(), new RegExp(escapeRe(pluginId)))
    const asking = page.locator(`[data-testid=source][data-source-id="${pluginId}"][data-state=pending-activation]`)
    await asking.waitFor({ timeout: LOAD_WAIT })
    const panel = asking.getByTestId("approval-panel")
    assert.equal(await panel.getAttribute("data-variant"), "activation")
    assert.match(await panel.innerText(), /Approve what it registers\?/)
    assert.match(await panel.getByTestId("approval-grew").innerText(), /registers hooks: chat\.params/)
    assert.equal(await asking.locator("button[data-action=allow]").isEnabled(), true)
    await page.locator("[data-testid=pending-badge][data-count='1']").waitFor({ timeout: WAIT })
    assert.match(await page.getByTestId("summary").innerText(), /registers more than you approved/)
    await page.locator('[data-testid=tool][data-tool="hello"]').waitFor({ timeout: LOAD_WAIT })
    assert.deepEqual(problems, [])
  })

  test("approved again, the page shows the tool with its schema, the host, and the plugin active", async () => {
    approveAll()
    await card(pluginId).and(page.locator("[data-state=active]")).waitFor({ timeout: LOAD_WAIT })
    // Wait on the page (not on time) until its host row runs both sources, then compare with the API.
    const hostRow = page.locator("[data-testid=host]", {
      has: page.locator(`[data-testid=host-source][data-source-id="${pluginId}"]`),
    })
    await hostRow.waitFor({ timeout: LOAD_WAIT })
    const snap = await status()
    await page.waitForFunction((rev) => Number(document.body.dataset.revision) >= rev, snap.revision, { timeout: WAIT })
    assert.ok(snap.hosts.length >= 1, JSON.stringify(snap.hosts))
    const host = page.locator(`[data-testid=host][data-pid="${snap.hosts[0].pid}"]`)
    assert.equal(await host.count(), 1)
    assert.equal(await host.getByTestId("host-pid").innerText(), String(snap.hosts[0].pid))
    assert.match(await host.getByTestId("host-memory").innerText(), /^\d+\.\d MiB$/)
    for (const id of [pluginId, toolId]) {
      assert.equal(await host.locator(`[data-testid=host-source][data-source-id="${id}"]`).count(), 1, id)
    }
    assert.match(await host.innerText(), /a\.ts/)
    assert.match(await page.getByTestId("host-list").innerText(), /Plugins run with your user.s rights in these processes/)

    // The plugin's card: green Active badge and where it runs.
    assert.equal(await card(pluginId).getByTestId("state").innerText(), "Active")
    assert.match(await card(pluginId).getByTestId("state").getAttribute("class"), /badge-ok/)
    const runsIn = card(pluginId).getByTestId("runs-in")
    assert.equal(await runsIn.innerText(), `Runs in Bun host pid ${snap.hosts[0].pid}`)

    // The tool: name, description, provider (a link to its card), backend, and its schema.
    const tool = page.locator('[data-testid=tool][data-tool="hello"]')
    assert.equal(await tool.getByTestId("tool-name").innerText(), "hello")
    assert.equal(await tool.getByTestId("tool-description").innerText(), "hi")
    assert.equal(await tool.getByTestId("tool-backend").innerText(), "Bun")
    const provider = tool.getByTestId("tool-source")
    assert.equal(await provider.getAttribute("href"), `#source-${toolId}`)
    await tool.locator("[data-testid=tool-params] > summary").click()
    const schema = tool.getByTestId("tool-schema")
    await schema.waitFor({ state: "visible", timeout: WAIT })
    const text = await schema.innerText()
    assert.match(text, /"who"/)
    assert.deepEqual(JSON.parse(text), snap.tools.find((t) => t.name === "hello").parameters)
    // The provider link goes to the source's card.
    await provider.click()
    await page.waitForFunction((id) => document.activeElement?.dataset?.sourceId === id, toolId, { timeout: WAIT })

    assert.equal(await page.getByTestId("pending-badge").isVisible(), false)
    assert.match(await page.getByTestId("summary").innerText(), /All 2 sources are active/)
    assert.deepEqual(problems, [])

    mkdirSync(artifacts, { recursive: true })
    await page.evaluate(() => window.scrollTo(0, 0))
    const path = join(artifacts, "tools-and-hosts.png")
    await page.screenshot({ path, fullPage: true })
    assert.ok(existsSync(path))
  })
})

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
}
