// What plugins reach on the status page, in a real browser (Debian's chromium through
// playwright-core): a tool's permission prompt (`ctx.ask`) answered from the page, toasts a
// plugin sends (`client.tui.showToast`), and paused sources with their Resume button.
//
// Runs the berth binary from BERTH_BIN (default: target/debug/berth of this repository) on a
// scratch machine; the fixtures are approved once each with the real CLI and loaded by it before
// `berth serve` starts (it activates approved sources in the background). Nothing waits on
// time: every step waits for what the page or the server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { copyFileSync, existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  approveAndLoad,
  berth,
  berthText,
  fetchSnapshot,
  launchBrowser,
  openPage,
  postApi,
  repo,
  saveScreenshot,
  scratchMachine,
  sourceRow,
  startServe,
  stubTauriBridge,
  tearDown,
  watchApiRequests,
  watchPage,
  write,
} from "./support.mjs"

/** Puts fixtures/plugins/<name>.ts into the project's .opencode/plugins/. */
function projectPlugin(machine, name) {
  const dir = join(machine.project, ".opencode", "plugins")
  mkdirSync(dir, { recursive: true })
  copyFileSync(join(repo, "fixtures", "plugins", `${name}.ts`), join(dir, `${name}.ts`))
}

/** Toasts on `page` stay up for a minute: a busy machine must not make them leave mid-test. */
const keepToasts = (page) =>
  page.addInitScript(() => {
    window.__berthToastMs = 60_000
  })

/** Chromium logs a refused request (4xx) itself: that is the expected refusal, not a page error. */
const pageErrors = (problems, status) => problems.filter((p) => !p.includes(`status of ${status}`))

describe("permission prompts against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let pluginId

  const prompt = () => page.getByTestId("prompt")
  const invoke = (path) => postApi(server, "invoke", { tool: "guarded_write", args: { path }, timeout_ms: 20_000 })

  before(async () => {
    machine = scratchMachine("prompts")
    projectPlugin(machine, "permission-gate")
    ;[pluginId] = approveAndLoad(machine)
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
    // serve activates the approved plugin in the background: its tool shows when it is ready.
    await page.locator('[data-testid=tool][data-tool="guarded_write"]').waitFor({ timeout: WAIT })
    assert.equal(await page.getByTestId("prompts").count(), 0, "a panel without prompts")
    assert.equal(await page.getByTestId("prompt-badge").isVisible(), false)
  })

  after(() => tearDown({ browser, server, machine }))

  test("Allow once: the page shows who asks for what, and the waiting call completes", async () => {
    const file = join(machine.root, "allowed.txt")
    const call = invoke(file) // waits until the prompt is answered
    await prompt().waitFor({ state: "visible", timeout: WAIT })
    const [open] = (await fetchSnapshot(server)).prompts
    assert.equal(open.permission, "edit")

    assert.equal(await prompt().getAttribute("data-prompt-id"), open.id)
    assert.equal(await prompt().getByTestId("prompt-permission").innerText(), "edit")
    assert.equal(await prompt().getByTestId("prompt-tool").innerText(), "guarded_write")
    assert.equal(await prompt().getByTestId("prompt-plugin").getAttribute("data-source-id"), pluginId)
    assert.match(await prompt().getByTestId("prompt-plugin").innerText(), /permission-gate/)
    assert.deepEqual(await prompt().locator("[data-testid=prompt-patterns] li").allInnerTexts(), [file])
    assert.match(
      await prompt().getByTestId("prompt-answers").innerText(),
      new RegExp(`^The plugin answered ${open.plugin_answer}; your cap is ${open.cap}\\.`),
    )
    for (const [reply, label] of [["once", "Allow once"], ["always", "Always allow"], ["reject", "Reject"]]) {
      const b = prompt().locator(`button[data-reply=${reply}]`)
      assert.equal(await b.innerText(), label)
      assert.equal(await b.isEnabled(), true)
    }
    const badge = page.getByTestId("prompt-badge")
    assert.equal(await badge.getAttribute("data-count"), "1")
    assert.match(await badge.innerText(), /1\s+permission request/)

    // Not modal: the rest of the page stays usable while the call waits.
    assert.equal(await page.locator("#app").getAttribute("aria-busy"), null)
    const params = page.locator('[data-testid=tool][data-tool="guarded_write"] [data-testid=tool-params]')
    await params.locator("summary").click()
    await params.getByTestId("tool-schema").waitFor({ state: "visible", timeout: WAIT })
    assert.equal(existsSync(file), false, "the tool wrote before it was allowed")
    // The waiting call says what it waits for.
    const waiting = page.locator(`[data-testid=call][data-status=running][data-receipt-id="${open.call_id}"]`)
    await waiting.waitFor({ timeout: WAIT })
    assert.equal(await waiting.getByTestId("call-status").innerText(), "Waiting for your answer")
    await saveScreenshot(page, "permission-prompt.png")

    // From the keyboard: the badge takes the focus to "Allow once", Enter answers.
    await badge.click()
    await page.waitForFunction(() => document.activeElement?.dataset?.reply === "once", null, { timeout: WAIT })
    const answered = page.waitForRequest((r) => r.url().endsWith("/api/prompt"))
    await page.keyboard.press("Enter")
    const req = await answered
    assert.deepEqual(req.postDataJSON(), { id: open.id, reply: "once" })
    assert.equal(req.headers().authorization, `Bearer ${server.token}`)

    const receipt = (await call).body
    assert.equal(receipt.status, "completed", JSON.stringify(receipt))
    assert.equal(receipt.error, null)
    assert.ok(existsSync(file))
    await page.getByTestId("prompts").waitFor({ state: "detached", timeout: WAIT })
    await page.locator("[data-testid=prompt-badge][data-count='0']").waitFor({ state: "hidden", timeout: WAIT })
    assert.deepEqual(problems, [])
  })

  test("Reject: the call ends cancelled and the tool writes nothing", async () => {
    const file = join(machine.root, "rejected.txt")
    const call = invoke(file)
    await prompt().waitFor({ state: "visible", timeout: WAIT })
    assert.deepEqual(await prompt().locator("[data-testid=prompt-patterns] li").allInnerTexts(), [file])
    await prompt().locator("button[data-reply=reject]").click()
    const receipt = (await call).body
    assert.equal(receipt.status, "cancelled", JSON.stringify(receipt))
    assert.equal(receipt.error?.code, "cancelled")
    assert.equal(existsSync(file), false)
    await page.getByTestId("prompts").waitFor({ state: "detached", timeout: WAIT })
    assert.deepEqual(problems, [])
  })

  test("Always: the call completes and the standing answer shows, for this plugin only", async () => {
    const file = join(machine.root, "always.txt")
    const call = invoke(file)
    await prompt().waitFor({ state: "visible", timeout: WAIT })
    await prompt().locator("button[data-reply=always]").click()
    assert.equal((await call).body.status, "completed")
    // The data dir changed in this process: the page gets the new snapshot live.
    const answer = page.getByTestId("standing-answer")
    await answer.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await answer.getAttribute("data-source"), pluginId)
    assert.match(await answer.innerText(), new RegExp(`edit ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} \u2192 always allowed for`))
    assert.equal(await answer.getByTestId("standing-source").getAttribute("data-source-id"), pluginId)
    const rules = (await fetchSnapshot(server)).standing_answers
    assert.deepEqual(rules.map((r) => [r.source_id, r.pattern, r.action]), [[pluginId, file, "allow"]])
    assert.deepEqual(problems, [])
  })

  test("a refused answer shows Berth's code, message and what to do inline; the prompt stays", async () => {
    const file = join(machine.root, "refused.txt")
    const call = invoke(file)
    await prompt().waitFor({ state: "visible", timeout: WAIT })
    // The real server refuses an id it does not know: send that instead of this prompt's id.
    await page.route("**/api/prompt", (route) =>
      route.continue({ postData: JSON.stringify({ id: "per_nope", reply: "once" }) }),
    )
    let refusal
    try {
      const response = page.waitForResponse((r) => r.url().endsWith("/api/prompt"))
      await prompt().locator("button[data-reply=once]").click()
      assert.equal((await response).status(), 422)
      refusal = (await (await response).json()).error
    } finally {
      await page.unroute("**/api/prompt")
    }
    const error = prompt().getByTestId("prompt-error")
    await error.waitFor({ state: "visible", timeout: WAIT })
    const text = await error.innerText()
    for (const part of [refusal.code, refusal.message, refusal.recovery]) assert.ok(text.includes(part), text)
    assert.equal(await error.getAttribute("role"), "alert")
    // Focus went back to the button that failed, and every button works again.
    await page.waitForFunction(() => document.activeElement?.dataset?.reply === "once", null, { timeout: WAIT })
    assert.equal(await prompt().locator("button[data-reply=reject]").isEnabled(), true)

    await prompt().locator("button[data-reply=reject]").click()
    assert.equal((await call).body.status, "cancelled")
    await page.getByTestId("prompts").waitFor({ state: "detached", timeout: WAIT })
    assert.equal(existsSync(file), false)
    assert.deepEqual(pageErrors(problems, 422), [])
    problems.length = 0
  })

  test("Recent calls: each call's outcome, newest first, live, also for a call another process made", async () => {
    // A call from the CLI, in a process of its own: headless, its `ctx.ask` ends action-required.
    let cli
    try {
      berthText(machine, ["invoke", "guarded_write", "--args", JSON.stringify({ path: join(machine.root, "cli.txt") }), "--json"])
      assert.fail("the headless call should have needed a person")
    } catch (e) {
      if (!e.stdout) throw e
      cli = JSON.parse(e.stdout)
    }
    assert.equal(cli.error?.code, "action-required", JSON.stringify(cli))
    // The page learns of it from the store (the data dir is watched): no reload, no polling.
    const newest = page.locator("[data-testid=call]").first()
    await page.locator(`[data-testid=call][data-receipt-id="${cli.receipt_id}"]`).waitFor({ timeout: WAIT })
    assert.equal(await newest.getAttribute("data-receipt-id"), cli.receipt_id)
    assert.equal(await newest.getAttribute("data-status"), "failed")
    assert.equal(await newest.getByTestId("call-status").innerText(), "Failed")
    assert.equal(await newest.getByTestId("call-code").innerText(), "action-required")
    assert.match(await newest.getByTestId("call-note").innerText(), /edit/)
    assert.equal(await newest.getByTestId("call-source").getAttribute("data-source-id"), pluginId)

    // Every row is a receipt, in the store's order, with its own outcome.
    const receipts = berth(machine, ["receipts"]).receipts.slice(0, 10)
    const rows = await page.locator("[data-testid=call]").evaluateAll((rs) =>
      rs.map((r) => ({ id: r.dataset.receiptId, status: r.dataset.status, took: r.querySelector("[data-testid=call-took]").textContent })),
    )
    assert.deepEqual(rows.map((r) => [r.id, r.status]), receipts.map((r) => [r.receipt_id, r.status]))
    assert.ok(rows.some((r) => r.status === "completed") && rows.some((r) => r.status === "cancelled"), JSON.stringify(rows))
    for (const r of rows) assert.match(r.took, /^\d+ ms$/, JSON.stringify(r))
    // Output stays out of the page (the error says what the call needed, with its path).
    const text = await page.getByTestId("call-list").innerText()
    assert.ok(!text.includes("wrote "), text)
    await page.getByTestId("call-list").scrollIntoViewIfNeeded()
    await saveScreenshot(page, "recent-calls.png")
    assert.deepEqual(problems, [])
  })
})

describe("toasts, plugin messages and paused sources", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let pluginId

  before(async () => {
    machine = scratchMachine("toasts")
    projectPlugin(machine, "shows-toast")
    ;[pluginId] = approveAndLoad(machine)
    server = await startServe(machine)
    browser = await launchBrowser()
    page = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    problems = watchPage(page)
    await keepToasts(page)
    await page.goto(server.url)
    await page.waitForSelector("body[data-ready='1']", { timeout: WAIT })
  })

  after(() => tearDown({ browser, server, machine }))

  test("a plugin's toast appears once, names the plugin, and is listed under Plugin messages", async () => {
    const toast = page.getByTestId("toast")
    await toast.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await toast.getAttribute("data-variant"), "success")
    assert.equal(await toast.getAttribute("data-plugin"), pluginId)
    assert.match(await toast.getByTestId("toast-plugin").innerText(), /shows-toast/)
    assert.equal(await toast.getByTestId("toast-title").innerText(), "Hello")
    assert.equal(await toast.getByTestId("toast-message").innerText(), "toast from a plugin")
    const region = page.getByTestId("toasts")
    assert.equal(await region.getAttribute("aria-live"), "polite")

    const list = page.getByTestId("plugin-messages")
    await list.waitFor({ state: "visible", timeout: WAIT })
    const item = list.getByTestId("plugin-message")
    assert.equal(await item.count(), 1)
    assert.equal(await item.getAttribute("data-variant"), "success")
    assert.match(await item.innerText(), /Success[^]*shows-toast[^]*Hello[^]*toast from a plugin/)
    const snap = await fetchSnapshot(server)
    assert.deepEqual(
      snap.notices.map((n) => [n.plugin, n.title, n.message, n.variant]),
      [[pluginId, "Hello", "toast from a plugin", "success"]],
    )
    await saveScreenshot(page, "plugin-toast.png")

    // Dismissed from the keyboard, it stays gone, also through a live re-render.
    await toast.getByTestId("toast-close").focus()
    await page.keyboard.press("Enter")
    await toast.waitFor({ state: "detached", timeout: WAIT })
    const rev = snap.revision
    write(join(machine.globalDir, "plugins", "another.ts"), 'export default { id: "another", server: async () => ({}) }\n')
    await page.waitForFunction((r) => Number(document.body.dataset.revision) > r, rev, { timeout: WAIT })
    assert.equal(await page.getByTestId("toast").count(), 0, "a toast was shown again")
    assert.equal(await list.getByTestId("plugin-message").count(), 1)
    assert.deepEqual(problems, [])
  })

  test("a toast goes away by itself, but not while it has the keyboard focus", async () => {
    // Each page records when toasts come and go (a MutationObserver, so nothing is missed
    // however busy the machine is) and shortens the toast's time; with `focus`, a new toast's
    // close button takes the focus the moment it appears.
    const watchToasts = (p, focus) =>
      p.addInitScript((focus) => {
        window.__berthToastMs = 300
        window.__toastLog = []
        document.addEventListener("DOMContentLoaded", () => {
          new MutationObserver((records) => {
            for (const r of records) {
              for (const n of r.addedNodes) {
                window.__toastLog.push({ added: performance.now() })
                if (focus) n.querySelector("[data-testid=toast-close]")?.focus()
              }
              for (const _ of r.removedNodes) window.__toastLog.push({ removed: performance.now() })
            }
          }).observe(document.getElementById("toasts"), { childList: true })
        })
      }, focus)
    const pages = []
    try {
      const timed = await browser.newPage({ viewport: { width: 1024, height: 768 } })
      pages.push(timed)
      const timedProblems = watchPage(timed)
      await watchToasts(timed, false)
      await timed.goto(server.url)
      await timed.waitForFunction(() => window.__toastLog.some((e) => "removed" in e), null, { timeout: WAIT })
      const [added, removed] = await timed.evaluate(() => window.__toastLog)
      assert.ok(removed.removed - added.added >= 290, JSON.stringify([added, removed]))
      assert.equal(await timed.getByTestId("toast").count(), 0)
      assert.equal(await timed.getByTestId("plugin-message").count(), 1, "the list keeps the message")
      assert.deepEqual(timedProblems, [])

      const focused = await browser.newPage({ viewport: { width: 1024, height: 768 } })
      pages.push(focused)
      const focusedProblems = watchPage(focused)
      await watchToasts(focused, true)
      await focused.goto(server.url)
      const toast = focused.getByTestId("toast")
      await toast.waitFor({ state: "visible", timeout: WAIT })
      await focused.waitForTimeout(600) // twice the toast's time: the focus keeps it
      assert.equal(await toast.count(), 1)
      assert.equal(await focused.evaluate(() => document.activeElement?.dataset?.testid), "toast-close")
      await focused.keyboard.press("Escape")
      await toast.waitFor({ state: "detached", timeout: WAIT })
      assert.deepEqual(focusedProblems, [])
    } finally {
      for (const p of pages) await p.close()
    }
  })

  test("a paused source says so and Resume posts /api/resume", async () => {
    // Pausing takes three host crashes in a row: show the page a snapshot that says paused.
    const snap = await fetchSnapshot(server)
    const paused = structuredClone(snap)
    const s = paused.sources.find((x) => x.id === pluginId)
    s.state = "paused"
    s.reason = "the Bun plugin host stopped 3 times within 5 minutes and is paused"
    paused.counts = { ...paused.counts, active: paused.counts.active - 1, failed: paused.counts.failed + 1 }
    const other = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    const otherProblems = watchPage(other)
    try {
      await other.route("**/api/status", (route) => route.fulfill({ json: paused }))
      await other.route("**/api/events*", (route) =>
        route.fulfill({
          status: 200,
          headers: { "content-type": "text/event-stream", "cache-control": "no-store" },
          body: `retry: 600000\nevent: status\ndata: ${JSON.stringify(paused)}\n\n`,
        }),
      )
      await other.goto(server.url)
      await other.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      const banner = other.getByTestId("paused-banner")
      await banner.waitFor({ state: "visible", timeout: WAIT })
      assert.match(await banner.innerText(), /1 source is paused/)
      assert.equal(await other.locator("[data-count=failed] strong").innerText(), "1")
      const row = sourceRow(other, pluginId)
      assert.equal(await row.getByTestId("state").innerText(), "Paused")
      assert.equal(await row.getByTestId("paused-reason").innerText(), `Reason: ${s.reason}`)
      assert.equal(await row.getByTestId("source-resume").isEnabled(), true)

      const request = other.waitForRequest((r) => r.url().endsWith("/api/resume"))
      await banner.getByTestId("resume").click()
      const req = await request
      assert.deepEqual(req.postDataJSON(), {})
      assert.equal(req.headers().authorization, `Bearer ${server.token}`)
      // The real server had nothing paused: the page says so instead of waiting forever.
      const progress = other.locator("[data-testid=resume-progress][data-phase=none]")
      await progress.waitFor({ state: "visible", timeout: WAIT })
      assert.match(await progress.innerText(), /Nothing was paused/)
      assert.equal(await banner.getByTestId("resume").isEnabled(), true)
      assert.deepEqual(otherProblems, [])
    } finally {
      await other.close()
    }
  })

  test("the Tauri bridge: answer_prompt, resume, and each notice toasted once", async () => {
    const snap = await fetchSnapshot(server)
    const base = structuredClone(snap)
    base.revision = snap.revision + 1
    base.notices = [
      ...snap.notices,
      { at_ms: Date.now(), plugin: pluginId, title: null, message: "disk almost full", variant: "warning" },
    ]
    base.prompts = [
      {
        id: "per_test1",
        plugin: pluginId,
        tool: "deploy",
        call_id: "rcpt_test1",
        permission: "bash",
        patterns: ["git push *"],
        always: ["git push origin *"],
        title: "deploy asks for bash: git push *",
        plugin_answer: "allow",
        cap: "ask",
        asked_at_ms: Date.now(),
      },
    ]
    const s = base.sources.find((x) => x.id === pluginId)
    s.state = "paused"
    const tauriPage = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    const tauriProblems = watchPage(tauriPage)
    const apiRequests = watchApiRequests(tauriPage)
    try {
      await stubTauriBridge(tauriPage, base, { hold: true })
      await keepToasts(tauriPage)
      await tauriPage.goto(`${server.origin}/`)
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      const emit = (next) =>
        tauriPage.evaluate((n) => window.__emitTauri("status-changed", { revision: n.revision, diff: {}, snapshot: n }), next)
      const invokes = () => tauriPage.evaluate(() => window.__invokes)

      // The prompt: what the plugin answered and the cap, then "Always allow".
      const p = tauriPage.locator('[data-testid=prompt][data-prompt-id="per_test1"]')
      await p.waitFor({ state: "visible", timeout: WAIT })
      assert.match(await p.getByTestId("prompt-answers").innerText(), /^The plugin answered allow; your cap is ask\./)
      assert.deepEqual(await p.locator("[data-testid=prompt-always] li").allInnerTexts(), ["git push origin *"])
      await p.locator("button[data-reply=always]").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 1, null, { timeout: WAIT })
      assert.deepEqual((await invokes())[0], { cmd: "answer_prompt", args: { id: "per_test1", reply: "always" } })
      await p.getByTestId("prompt-progress").waitFor({ state: "visible", timeout: WAIT })
      assert.equal(await p.locator("button[data-reply=once]").isDisabled(), true)
      await tauriPage.evaluate(() => window.__answers.answer_prompt.resolve(null))
      await p.locator("[data-testid=prompt-progress][data-phase=sent]").waitFor({ timeout: WAIT })

      // Both notices were toasted once; the next snapshot (same notices, no prompt) adds none.
      await tauriPage.locator("[data-testid=toast][data-variant=warning]").waitFor({ timeout: WAIT })
      assert.equal(await tauriPage.getByTestId("toast").count(), 2)
      const answered = { ...structuredClone(base), revision: base.revision + 1, prompts: [] }
      await emit(answered)
      await tauriPage.getByTestId("prompts").waitFor({ state: "detached", timeout: WAIT })
      assert.equal(await tauriPage.getByTestId("prompt-badge").isVisible(), false)
      assert.equal(await tauriPage.getByTestId("toast").count(), 2)

      // Resume: invoke('resume'), then the source comes back with the next event.
      await tauriPage.getByTestId("paused-banner").getByTestId("resume").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 2, null, { timeout: WAIT })
      assert.equal((await invokes())[1].cmd, "resume")
      await tauriPage.evaluate(() => window.__answers.resume.resolve(["bun"]))
      const progress = tauriPage.locator("[data-testid=resume-progress][data-phase=sent]")
      await progress.waitFor({ timeout: WAIT })
      assert.match(await progress.innerText(), /Resumed \(Bun\)/)
      const back = structuredClone(answered)
      back.revision += 1
      back.sources.find((x) => x.id === pluginId).state = "active"
      await emit(back)
      await tauriPage.getByTestId("paused-banner").waitFor({ state: "detached", timeout: WAIT })
      assert.equal(await sourceRow(tauriPage, pluginId).getAttribute("data-state"), "active")
      assert.deepEqual(apiRequests, [], "the page used HTTP although the Tauri bridge was there")
      assert.deepEqual(tauriProblems, [])
    } finally {
      await tauriPage.close()
    }
  })
})
