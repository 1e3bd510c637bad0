// Berth's status page in a real browser (Debian's chromium through playwright-core).
//
// Builds nothing: it runs the berth binary from BERTH_BIN (default: target/debug/berth of this
// repository) as `berth serve --json` on a scratch machine (its own HOME, XDG folders and a
// git-initialised project; OpenCode's variables cleared), opens the URL it prints, and checks
// what a person sees. Screenshots go to <repo>/test-artifacts/.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { existsSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  berthText,
  fetchSnapshot,
  fetchStatus,
  launchBrowser,
  openPage,
  saveScreenshot,
  scratchMachine,
  sourceRow,
  startServe,
  stubTauriBridge,
  tearDown,
  waitForRevision,
  watchApiRequests,
  write,
} from "./support.mjs"

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
    ;({ page, problems } = await openPage(browser, server.url, { width: 1024, height: 768 }))
  })

  after(() => tearDown({ browser, server, machine }))

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
    await saveScreenshot(page, "status-page-empty.png")
  })

  test("the API refuses a request without the token", async () => {
    const bare = await fetch(`${server.origin}/api/status`)
    assert.equal(bare.status, 401)
    const wrong = await fetch(`${server.origin}/api/status`, { headers: { authorization: "Bearer nope" } })
    assert.equal(wrong.status, 401)
    const events = await fetch(`${server.origin}/api/events`)
    assert.equal(events.status, 401)
    const ok = await fetchStatus(server)
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
    const path = await saveScreenshot(page, "status-page.png")
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
    ;({ page, problems } = await openPage(browser, server.url, { width: 1280, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("every source of the snapshot has a row with its state, and diagnostics show", async () => {
    const res = await fetchStatus(server)
    const snap = await res.json()
    assert.ok(snap.sources.length >= 5, `expected the fixture's sources, got ${snap.sources.length}`)
    await waitForRevision(page, snap.revision)

    assert.equal(await page.locator("[data-testid=source]").count(), snap.sources.length)
    for (const s of snap.sources) {
      const row = sourceRow(page, s.id)
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
    const res = await fetchStatus(server)
    const snap = await res.json()
    const tauriPage = await browser.newPage({ viewport: { width: 1024, height: 768 } })
    const apiRequests = watchApiRequests(tauriPage)
    try {
      // A stand-in for withGlobalTauri: `invoke('status')` and `listen('status-changed')`.
      await stubTauriBridge(tauriPage, snap)
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
    const path = await saveScreenshot(page, "status-page-sources.png")
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

  const status = () => fetchSnapshot(server)
  const approveAll = () => berthText(machine, ["approve", "--all"])
  const card = (id) => sourceRow(page, id)

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
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("before any approval: no tools, no host, and both sections say why", async () => {
    const snap = await status()
    assert.deepEqual(snap.tools, [])
    assert.deepEqual(snap.hosts, [])
    assert.match(await page.getByTestId("tools-empty").innerText(), /No active tools yet — approve a source to load its tools\./)
    assert.match(await page.getByTestId("hosts-empty").innerText(), /No plugin host is running/)
    assert.equal(await page.locator("[data-testid=tool]").count(), 0)
    assert.equal(await page.locator("[data-testid=host]").count(), 0)
  })

  test("approved once, the plugin and the tool load and register what they contribute; nothing asks again", async () => {
    // Every state the page shows the plugin in on the way: none may ask for it a second time.
    await page.evaluate((id) => {
      window.__statesSeen = []
      new MutationObserver(() => {
        const row = document.querySelector(`[data-testid=source][data-source-id="${id}"]`)
        if (row && window.__statesSeen.at(-1) !== row.dataset.state) window.__statesSeen.push(row.dataset.state)
      }).observe(document.getElementById("app"), { childList: true, subtree: true })
    }, pluginId)
    const approved = approveAll()
    assert.match(approved, new RegExp(escapeRe(pluginId)))
    assert.match(approved, new RegExp(escapeRe(toolId)))
    await card(pluginId).and(page.locator("[data-state=active]")).waitFor({ timeout: LOAD_WAIT })
    const seen = await page.evaluate(() => window.__statesSeen)
    assert.ok(!seen.includes("pending-activation"), `asked a second time: ${seen.join(" → ")}`)
    assert.deepEqual(seen.filter((st) => !["pending-approval", "approved", "preparing", "active"].includes(st)), [], seen.join(" → "))
    assert.equal(seen.at(-1), "active")
    await page.locator('[data-testid=tool][data-tool="hello"]').waitFor({ timeout: LOAD_WAIT })
    // Nothing of it is capped by the product's defaults: not partially limited.
    const loaded = (await status()).sources.find((x) => x.id === pluginId)
    assert.deepEqual(loaded.limited, [], JSON.stringify(loaded))
    assert.equal(await card(pluginId).getByTestId("limited").count(), 0)
    assert.equal(await card(pluginId).getByTestId("partially-limited").count(), 0)
    // Wait on the page (not on time) until its host row runs both sources, then compare with the API.
    const hostRow = page.locator("[data-testid=host]", {
      has: page.locator(`[data-testid=host-source][data-source-id="${pluginId}"]`),
    })
    await hostRow.waitFor({ timeout: LOAD_WAIT })
    const snap = await status()
    await waitForRevision(page, snap.revision)
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

    await page.evaluate(() => window.scrollTo(0, 0))
    const path = await saveScreenshot(page, "tools-and-hosts.png")
    assert.ok(existsSync(path))
  })

  test("a changed version that registers more than the active one waits, and the panel says what it adds", async () => {
    // In the person's own global folder a change that does not grow what the code can do
    // reloads without asking; this one then registers a hook the active version did not.
    const file = join(machine.globalDir, "plugins", "a.ts")
    write(
      file,
      'export default { id: "a", server: async () => ({ "chat.params": async () => {}, "command.execute.before": async () => {} }) }\n',
    )
    const asking = page.locator(`[data-testid=source][data-source-id="${pluginId}"][data-state=pending-activation]`)
    await asking.waitFor({ timeout: LOAD_WAIT })
    const snap = await status()
    await waitForRevision(page, snap.revision)
    const s = snap.sources.find((x) => x.id === pluginId)
    assert.equal(s.state, "pending-activation")
    assert.ok(s.approval.grew.some((g) => g.includes("command.execute.before")), JSON.stringify(s.approval))

    const panel = asking.getByTestId("approval-panel")
    assert.equal(await panel.getAttribute("data-variant"), "activation")
    const text = await panel.innerText()
    assert.match(text, /Allow its new version to register more\?/)
    assert.match(text, /its new version registers more than the version that was active/)
    assert.doesNotMatch(text, /Approve what it registers/)
    const grew = panel.getByTestId("approval-grew")
    assert.match(await grew.innerText(), /Its new version registers more:/)
    for (const g of s.approval.grew) assert.equal(await grew.locator(`li[data-grew="${g}"]`).count(), 1, g)
    await page.locator("[data-testid=pending-badge][data-count='1']").waitFor({ timeout: WAIT })
    assert.equal(await page.getByTestId("summary").innerText(), "1 changed plugin registers more than before")

    await asking.locator("button[data-action=allow]").click()
    await card(pluginId).and(page.locator("[data-state=active]")).waitFor({ timeout: LOAD_WAIT })
    const settled = (await status()).sources.find((x) => x.id === pluginId)
    assert.equal(settled.state, "active")
    assert.deepEqual(settled.approval.grew, [])
    await page.locator("[data-testid=pending-badge][data-count='0']").waitFor({ state: "hidden", timeout: WAIT })
    assert.deepEqual(problems, [])
  })
})

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
}
