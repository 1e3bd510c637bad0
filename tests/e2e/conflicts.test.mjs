// Tool conflicts on the status page, in a real browser, against the real server.
//
// A scratch machine has a tool file and a plugin that both register `lookup`. Both are approved
// with the CLI; `berth serve` loads them. The page shows the conflict (who serves it, OpenCode's
// pick, that it waits for a choice); "Use this" on the tool file sends the choice, the page shows
// it chosen once the server says so, and the real CLI on the same data dir calls the chosen
// implementation. The Tauri bridge sends the same choice as the `choose` command, and a refusal
// is shown inline. Nothing waits on time: every step waits for what the page or server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { join } from "node:path"
import {
  WAIT,
  approveAndLoad,
  berth,
  fetchSnapshot,
  launchBrowser,
  openPage,
  postApi,
  saveScreenshot,
  scratchMachine,
  startServe,
  stubTauriBridge,
  tearDown,
  waitForRevision,
  write,
} from "./support.mjs"

const LOAD_WAIT = 45_000

describe("tool conflicts against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let fileId
  let pluginId

  const conflict = () => page.locator('[data-testid=conflict][data-tool="lookup"]')
  const candidate = (id) => conflict().locator(`[data-testid=conflict-candidate][data-candidate="${id}"]`)

  before(async () => {
    machine = scratchMachine("conflicts")
    write(join(machine.project, ".opencode", "tools", "lookup.ts"),
      'export default { description: "lookup from the file", args: {}, async execute() { return "from the file" } }\n')
    write(join(machine.project, ".opencode", "plugins", "p.ts"),
      'export default async () => ({ tool: { lookup: { description: "lookup from the plugin", args: {}, async execute() { return "from the plugin" } } } })\n')
    approveAndLoad(machine)
    const sources = berth(machine, ["sources"]).sources
    fileId = sources.find((s) => s.entry.endsWith("/tools/lookup.ts")).id
    pluginId = sources.find((s) => s.entry.endsWith("/plugins/p.ts")).id
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("the page shows the conflict, and a choice made there holds for the CLI too", async () => {
    await conflict().waitFor({ timeout: LOAD_WAIT })
    assert.equal(await conflict().getAttribute("data-state"), "asks")
    assert.equal(await conflict().getAttribute("data-serving"), pluginId, "OpenCode's pick serves until the person chooses")
    assert.equal(await conflict().locator("[data-testid=conflict-candidate]").count(), 2)
    assert.match(await conflict().getByTestId("conflict-reason").innerText(), /2 candidates register `lookup`/)
    // Berth's built-ins are named under the tools, each serving its name.
    assert.deepEqual(await page.locator("[data-testid=builtin]").evaluateAll((els) => els.map((e) => [e.dataset.tool, e.dataset.serving])),
      [["read", "1"], ["glob", "1"], ["grep", "1"]])
    // The tool row says it is contested.
    await page.locator('[data-testid=tool][data-tool="lookup"] [data-testid=tool-contested]').waitFor({ timeout: WAIT })
    // While it asks, the serving candidate can be kept as the choice; the other can be used.
    assert.equal(await candidate(pluginId).getByTestId("choose").innerText(), "Keep this")
    assert.equal(await candidate(fileId).getByTestId("choose").innerText(), "Use this")

    const sent = page.waitForRequest((r) => r.url().endsWith("/api/choose"))
    await candidate(fileId).getByTestId("choose").click()
    assert.deepEqual((await sent).postDataJSON(), { tool: "lookup", candidate: fileId })
    await page.locator('[data-testid=conflict][data-tool="lookup"][data-state="chosen"]').waitFor({ timeout: LOAD_WAIT })
    assert.equal(await conflict().getAttribute("data-serving"), fileId)
    // Chosen: the serving candidate has no button any more.
    assert.equal(await candidate(fileId).getByTestId("choose").count(), 0)
    await saveScreenshot(page, "conflicts.png")

    // The same store: the CLI sees the choice and calls the chosen implementation.
    const c = berth(machine, ["conflicts"]).conflicts.find((x) => x.tool === "lookup")
    assert.equal(c.state, "chosen")
    assert.equal(c.serving, fileId)
    assert.equal(berth(machine, ["invoke", "lookup"]).output, "from the file")
    const snap = await fetchSnapshot(server)
    await waitForRevision(page, snap.revision)
    assert.deepEqual(problems, [])
  })

  test("a choice the server refuses says why, with its code", async () => {
    const r = await postApi(server, "choose", { tool: "lookup", candidate: "tool-nowhere" })
    assert.equal(r.status, 422)
    assert.equal(r.body.error.code, "invalid-arguments")
    assert.match(r.body.error.message, /not a candidate/)
  })

  test("the Tauri bridge: choose {tool, candidate}, a refusal inline", async () => {
    const snap = await fetchSnapshot(server)
    const tauriPage = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    try {
      // A snapshot where the conflict asks again.
      const asking = structuredClone(snap)
      const c = asking.conflicts.find((x) => x.tool === "lookup")
      c.state = "asks"
      c.serving = fileId
      await stubTauriBridge(tauriPage, asking, { hold: true })
      await tauriPage.goto(`${server.origin}/`)
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      const row = tauriPage.locator(`[data-testid=conflict][data-tool="lookup"] [data-testid=conflict-candidate][data-candidate="${pluginId}"]`)
      await row.getByTestId("choose").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 1, null, { timeout: WAIT })
      assert.deepEqual((await tauriPage.evaluate(() => window.__invokes))[0], { cmd: "choose", args: { tool: "lookup", candidate: pluginId } })
      await tauriPage.evaluate(() => window.__answers.choose.reject({ code: "action-required", message: "it cannot serve now", recovery: "fix it first" }))
      await tauriPage.getByTestId("choose-error").waitFor({ timeout: WAIT })
      assert.match(await tauriPage.getByTestId("choose-error").innerText(), /it cannot serve now/)
    } finally {
      await tauriPage.close()
    }
  })
})
