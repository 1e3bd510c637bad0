// The approval panel in a real browser (Debian's chromium through playwright-core).
//
// Runs the berth binary from BERTH_BIN (default: target/debug/berth of this repository) as
// `berth serve --json` on a scratch machine, decides from the page, and checks the decisions
// with the real CLI (`berth approvals`, `berth approve`) on the same HOME and data dir.
// Nothing waits on time: every step waits for what the page or the server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  artifacts,
  berth,
  fetchSnapshot,
  launchBrowser,
  openPage,
  scratchMachine,
  sourceRow,
  startServe,
  stubTauriBridge,
  tearDown,
  waitForBadgeCount,
  waitForRevision,
  watchApiRequests,
  watchPage,
  write,
} from "./support.mjs"

// A decision made elsewhere (the CLI) must reach an open page within a second or two.
const LIVE_WAIT = 3_000

describe("approval panel against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  const plugins = {}

  const status = () => fetchSnapshot(server)
  const row = (id) => sourceRow(page, id)
  const rowIn = (id, state) => page.locator(`[data-testid=source][data-source-id="${id}"][data-state="${state}"]`)
  /** An approved source: `approved` until the server has loaded it, `active` once it has. */
  const rowApproved = (id) =>
    page.locator(`[data-testid=source][data-source-id="${id}"]:is([data-state="approved"], [data-state="active"])`)
  const badge = () => page.getByTestId("pending-badge")
  const badgeCount = async () => Number(await badge().getAttribute("data-count"))
  const focused = () =>
    page.evaluate(() => {
      const a = document.activeElement
      return { action: a?.dataset?.action ?? null, source: a?.closest("[data-testid=source]")?.dataset.sourceId ?? null }
    })

  before(async () => {
    machine = scratchMachine("approval")
    const dir = join(machine.globalDir, "plugins")
    const files = {
      alpha: 'export default { id: "alpha", server: async () => ({}) }\n',
      spawner:
        'export default {\n  id: "spawner",\n  server: async () => {\n    Bun.spawn(["notify-send", "hello"])\n    return {}\n  },\n}\n',
      cli: 'export default { id: "cli", server: async () => ({}) }\n',
      later: 'export default { id: "later", server: async () => ({}) }\n',
    }
    for (const [name, text] of Object.entries(files)) write(join(dir, `${name}.ts`), text)
    server = await startServe(machine)
    const snap = await status()
    for (const name of Object.keys(files)) {
      const s = snap.sources.find((x) => x.entry === join(dir, `${name}.ts`))
      assert.ok(s, `no source for ${name}.ts in ${JSON.stringify(snap.sources.map((x) => x.entry))}`)
      plugins[name] = { id: s.id, file: join(dir, `${name}.ts`) }
    }
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
    await page.evaluate(() => {
      window.__berthNoReload = true
    })
  })

  after(() => tearDown({ browser, server, machine }))

  test("every waiting source has a panel that says what it is, where it runs and what it can do", async () => {
    const snap = await status()
    await waitForRevision(page, snap.revision)
    assert.equal(snap.counts.pending_approval, 4)
    assert.equal(await badgeCount(), 4)
    assert.equal(await badge().isVisible(), true)
    assert.match(await badge().innerText(), /4\s+waiting for approval/)

    for (const s of snap.sources.filter((x) => x.state === "pending-approval")) {
      const panel = row(s.id).getByTestId("approval-panel")
      await panel.waitFor({ state: "visible", timeout: WAIT })
      const text = await panel.innerText()
      assert.match(text, /Allow this plugin to run\?/)
      assert.equal(await panel.getByTestId("approval-id").innerText(), s.id)
      assert.equal(await panel.getByTestId("source-origin").innerText(), s.origin)
      assert.equal(await panel.getByTestId("source-entry").innerText(), s.entry)
      const runs = await panel.getByTestId("approval-runs").innerText()
      // The execution domain reads as words (its id stays in the title).
      const [host, uid] = s.approval.domain.split("/uid-")
      assert.ok(runs.includes(`this computer (${host}), as ${uid === "0" ? "root" : "user " + uid}`), runs)
      assert.ok(!runs.includes("/uid-"), runs)
      assert.equal(await panel.getByTestId("approval-domain").getAttribute("title"), `The execution domain this decision applies to: ${s.approval.domain}`)
      assert.match(runs, s.approval.backend === "bun" ? /^Bun on / : /^Node\.js on /)
      assert.match(runs, /with that user.s rights/)
      for (const line of s.capabilities.summary) assert.ok(text.includes(line), `${s.id}: ${line}`)
      assert.match(await panel.getByTestId("approval-note").innerText(), /your user.s rights[^]*cannot undo side effects/)
      assert.equal(await panel.getByTestId("approval-grew").count(), 0, "nothing grew before any approval")
      for (const action of ["allow", "deny", "later"]) {
        const b = row(s.id).locator(`button[data-action=${action}]`)
        assert.equal(await b.count(), 1, `${s.id} ${action}`)
        assert.equal(await b.isEnabled(), true)
      }
    }
    assert.deepEqual(problems, [])
  })

  test("Allow: the buttons wait for Berth, then the live event moves the source on", async () => {
    const { id } = plugins.alpha
    const before = await badgeCount()
    let release
    const held = new Promise((r) => (release = r))
    let seen
    const requested = new Promise((r) => (seen = r))
    await page.route("**/api/approve", async (route) => {
      seen(route.request())
      await held
      await route.continue()
    })
    try {
      await row(id).locator("button[data-action=allow]").click()
      const req = await requested
      // The decision carries the digest the card showed: Berth refuses it if the bytes moved.
      const shown = (await status()).sources.find((s) => s.id === id)
      assert.deepEqual(req.postDataJSON(), { ids: [id], digests: { [id]: shown.digest } })
      assert.equal(req.headers().authorization, `Bearer ${server.token}`)

      // In flight: progress shows, every decision button is disabled, and nothing changed yet.
      const progress = row(id).getByTestId("decision-progress")
      await progress.waitFor({ state: "visible", timeout: WAIT })
      assert.match(await progress.innerText(), /Allowing/)
      for (const action of ["allow", "deny", "later"]) {
        assert.equal(await row(id).locator(`button[data-action=${action}]`).isDisabled(), true, action)
      }
      assert.equal(await row(id).getAttribute("data-state"), "pending-approval", "the page changed state optimistically")
      assert.equal(await badgeCount(), before)
    } finally {
      release()
    }
    await rowApproved(id).waitFor({ timeout: WAIT })
    await page.unroute("**/api/approve")
    await waitForBadgeCount(page, before - 1)
    assert.equal(await page.evaluate(() => window.__berthNoReload), true, "the page was reloaded")

    const decision = row(id).getByTestId("decision")
    assert.equal(await decision.getAttribute("data-decision"), "allow")
    assert.match(await decision.innerText(), /Approved/)
    assert.equal(await row(id).getByTestId("decided-at").count(), 1)
    assert.equal(await row(id).getByTestId("approval-panel").count(), 0)
    assert.equal(await row(id).getByTestId("decision-progress").count(), 0)
    // The server loads an approved plugin in the background: "Approved" until it runs, then "Active".
    assert.match(await row(id).getByTestId("state").innerText(), /^(Approved|Active)$/)
    // Focus stayed with the source: on its Revoke button now that Allow is gone.
    assert.deepEqual(await focused(), { action: "deny", source: id })
    assert.match(await row(id).locator("button[data-action=deny]").innerText(), /Revoke/)

    const approvals = berth(machine, ["approvals"]).approvals.filter((a) => a.source_id === id)
    assert.equal(approvals.length, 1, JSON.stringify(approvals))
    assert.equal(approvals[0].decision, "allow")
    assert.equal(approvals[0].decided_by, "page")
    assert.deepEqual(problems, [])
  })

  test("Deny: the source becomes disabled, with a way to allow it instead", async () => {
    const { id } = plugins.spawner
    const before = await badgeCount()
    await row(id).locator("button[data-action=deny]").click()
    await rowIn(id, "disabled").waitFor({ timeout: WAIT })
    await waitForBadgeCount(page, before - 1)
    const decision = row(id).getByTestId("decision")
    assert.equal(await decision.getAttribute("data-decision"), "deny")
    assert.match(await decision.innerText(), /Denied/)
    assert.match(await row(id).locator("button[data-action=allow]").innerText(), /Allow instead/)
    // The capabilities stay visible on a decided source.
    assert.match(await row(id).getByTestId("capabilities").innerText(), /Bun\.spawn/)

    const approvals = berth(machine, ["approvals"]).approvals.filter((a) => a.source_id === id)
    assert.equal(approvals[0].decision, "deny")
    assert.equal(approvals[0].decided_by, "page")
    assert.deepEqual(problems, [])
  })

  test("a refused decision shows Berth's code, message and what to do, inline", async () => {
    const { id } = plugins.spawner
    // The real server refuses an id it does not know: send that instead of this source's id.
    await page.route("**/api/approve", (route) =>
      route.continue({ postData: JSON.stringify({ ids: ["no-such-source"], digests: { "no-such-source": "sha256:0123456789" } }) }),
    )
    let refusal
    try {
      const response = page.waitForResponse((r) => r.url().endsWith("/api/approve"))
      await row(id).locator("button[data-action=allow]").click()
      refusal = await (await response).json()
      assert.equal((await response).status(), 422)
    } finally {
      await page.unroute("**/api/approve")
    }
    const error = row(id).getByTestId("decision-error")
    await error.waitFor({ state: "visible", timeout: WAIT })
    const text = await error.innerText()
    assert.ok(text.includes(refusal.error.code), text)
    assert.ok(text.includes(refusal.error.message), text)
    assert.ok(text.includes(refusal.error.recovery), text)
    assert.equal(await error.getAttribute("role"), "alert")
    // Nothing changed, and the person can try again.
    assert.equal(await row(id).getAttribute("data-state"), "disabled")
    assert.equal(await row(id).locator("button[data-action=allow]").isEnabled(), true)
    assert.equal(await row(id).getByTestId("decision-progress").count(), 0)
    // Chromium logs the 422 response itself; that is the expected refusal, not a page error.
    const other = problems.filter((p) => !/status of 422/.test(p))
    assert.deepEqual(other, [])
    problems.length = 0
  })

  test("a decision made with the CLI while the page is open shows up within a second or two", async () => {
    const { id } = plugins.cli
    const before = await badgeCount()
    const started = Date.now()
    const out = berth(machine, ["approve", id])
    assert.ok(JSON.stringify(out).includes(id), JSON.stringify(out))
    await rowApproved(id).waitFor({ timeout: LIVE_WAIT })
    const took = Date.now() - started
    await waitForBadgeCount(page, before - 1, LIVE_WAIT)
    assert.equal(await row(id).getByTestId("decision").getAttribute("data-decision"), "allow")
    const approvals = berth(machine, ["approvals"]).approvals.filter((a) => a.source_id === id)
    assert.notEqual(approvals[0].decided_by, "page")
    assert.equal(await page.evaluate(() => window.__berthNoReload), true, "the page was reloaded")
    assert.ok(took < LIVE_WAIT, `took ${took} ms`)
    assert.deepEqual(problems, [])
  })

  test("an approved plugin that starts using the network asks again and says exactly what grew", async () => {
    const { id, file } = plugins.alpha
    const before = await badgeCount()
    write(file, 'export default {\n  id: "alpha",\n  server: async () => {\n    await fetch("https://example.com/ping")\n    return {}\n  },\n}\n')
    await rowIn(id, "pending-approval").waitFor({ timeout: WAIT })
    await waitForBadgeCount(page, before + 1)
    const snap = await status()
    const s = snap.sources.find((x) => x.id === id)
    assert.equal(s.approval.decision, "allow")
    assert.ok(s.approval.grew.length > 0)

    const panel = row(id).getByTestId("approval-panel")
    await panel.waitFor({ state: "visible", timeout: WAIT })
    const grew = panel.getByTestId("approval-grew")
    const text = await grew.innerText()
    assert.match(text, /Asked again because it now:/)
    assert.match(text, /uses the network/)
    assert.match(text, /fetch/)
    for (const g of s.approval.grew) assert.equal(await grew.locator(`li[data-grew="${g}"]`).count(), 1, g)
    assert.match(await panel.innerText(), /You approved/)
    assert.match(await row(id).locator("button[data-action=allow]").innerText(), /Allow again/)

    mkdirSync(artifacts, { recursive: true })
    const path = join(artifacts, "approval-panel.png")
    // The row may be re-rendered by a live event at any moment: capture its box from the page.
    // A live event may re-render the row between two calls: retry until one capture holds.
    for (let attempt = 0; ; attempt++) {
      try {
        await row(id).scrollIntoViewIfNeeded()
        const box = await row(id).boundingBox()
        if (!box) throw new Error("the row was re-rendered")
        await page.screenshot({ path, clip: box })
        break
      } catch (e) {
        if (attempt >= 10) throw e
        await page.waitForTimeout(100)
      }
    }
    assert.ok(existsSync(path))
    await page.screenshot({ path: join(artifacts, "approval-page.png"), fullPage: true })
    assert.deepEqual(problems, [])
  })

  test("Later hides the panel for this page session; the badge still counts the source", async () => {
    const { id } = plugins.later
    const before = await badgeCount()
    await row(id).locator("button[data-action=later]").click()
    await row(id).getByTestId("approval-panel").waitFor({ state: "detached", timeout: WAIT })
    assert.equal(await row(id).getAttribute("data-state"), "pending-approval")
    assert.equal(await badgeCount(), before)
    assert.match(await row(id).getByTestId("decision").innerText(), /decide later/)
    // Focus moved to the way back, not to the top of the page.
    assert.deepEqual(await focused(), { action: "review", source: id })

    // A live re-render (a new plugin appears) keeps it put off, and the badge counts both.
    const extra = join(machine.globalDir, "plugins", "extra.ts")
    write(extra, 'export default { id: "extra", server: async () => ({}) }\n')
    await page
      .locator("[data-testid=source][data-state=pending-approval]", {
        has: page.locator("[data-testid=source-entry]", { hasText: extra }),
      })
      .waitFor({ timeout: WAIT })
    await waitForBadgeCount(page, before + 1)
    assert.equal(await row(id).getByTestId("approval-panel").count(), 0)
    assert.equal(await row(id).getAttribute("data-state"), "pending-approval")

    // From the keyboard: "Review now" brings the panel back with focus on Allow.
    await row(id).locator("button[data-action=review]").focus()
    await page.keyboard.press("Enter")
    await row(id).getByTestId("approval-panel").waitFor({ state: "visible", timeout: WAIT })
    assert.deepEqual(await focused(), { action: "allow", source: id })

    // Later again, then the header badge brings every put-off panel back.
    await row(id).locator("button[data-action=later]").click()
    await row(id).getByTestId("approval-panel").waitFor({ state: "detached", timeout: WAIT })
    await badge().click()
    await row(id).getByTestId("approval-panel").waitFor({ state: "visible", timeout: WAIT })
    assert.equal((await focused()).action, "allow")
    assert.deepEqual(problems, [])
  })

  test("the Tauri bridge: invoke('approve'/'deny', {ids, digests}), no optimistic change, errors inline", async () => {
    const snap = await status()
    const waiting = snap.sources.filter((s) => s.state === "pending-approval")
    assert.ok(waiting.length >= 2)
    const [first, second] = waiting
    const tauriPage = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    const tauriProblems = watchPage(tauriPage)
    const apiRequests = watchApiRequests(tauriPage)
    try {
      await stubTauriBridge(tauriPage, snap, { hold: true })
      await tauriPage.goto(`${server.origin}/`)
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      const trow = (id) => sourceRow(tauriPage, id)

      await trow(first.id).locator("button[data-action=allow]").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 1, null, { timeout: WAIT })
      assert.deepEqual(await tauriPage.evaluate(() => window.__invokes), [{ cmd: "approve", args: { ids: [first.id], digests: { [first.id]: first.digest } } }])
      await trow(first.id).getByTestId("decision-progress").waitFor({ state: "visible", timeout: WAIT })
      await tauriPage.evaluate((id) => window.__answers.approve.resolve([id]), first.id)
      // Berth answered, but the state only changes with its event.
      await trow(first.id).locator("[data-testid=decision-progress][data-phase=sent]").waitFor({ timeout: WAIT })
      assert.equal(await trow(first.id).getAttribute("data-state"), "pending-approval")
      assert.equal(await trow(first.id).locator("button[data-action=allow]").isDisabled(), true)

      const next = structuredClone(snap)
      next.revision = snap.revision + 1
      const changed = next.sources.find((s) => s.id === first.id)
      changed.state = "approved"
      changed.approval = { ...changed.approval, decision: "allow", decided_at_ms: Date.now(), grew: [] }
      next.counts.pending_approval -= 1
      await tauriPage.evaluate((next) => window.__emitTauri("status-changed", { revision: next.revision, diff: {}, snapshot: next }), next)
      await tauriPage.locator(`[data-source-id="${first.id}"][data-state=approved]`).waitFor({ timeout: WAIT })
      assert.equal(await trow(first.id).getByTestId("decision-progress").count(), 0)
      // Decided, not loaded yet: the badge and the card say so, and no second question is asked.
      assert.equal(await trow(first.id).getByTestId("state").innerText(), "Approved")
      assert.match(await trow(first.id).getByTestId("approved-note").innerText(), /not loaded yet/)
      assert.equal(await trow(first.id).getByTestId("approval-panel").count(), 0)
      assert.equal(await tauriPage.getByTestId("pending-badge").getAttribute("data-count"), String(next.counts.pending_approval))

      await trow(second.id).locator("button[data-action=deny]").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 2, null, { timeout: WAIT })
      assert.deepEqual((await tauriPage.evaluate(() => window.__invokes))[1], { cmd: "deny", args: { ids: [second.id], digests: { [second.id]: second.digest } } })
      const refusal = { code: "temporarily-unavailable", capability: "approval", message: "the store is busy", recovery: "retry", plugin: null }
      await tauriPage.evaluate((e) => window.__answers.deny.reject(e), refusal)
      const error = trow(second.id).getByTestId("decision-error")
      await error.waitFor({ state: "visible", timeout: WAIT })
      const text = await error.innerText()
      for (const part of [refusal.code, refusal.message, refusal.recovery]) assert.ok(text.includes(part), text)
      assert.equal(await trow(second.id).locator("button[data-action=deny]").isEnabled(), true)
      assert.equal(await trow(second.id).getAttribute("data-state"), "pending-approval")
      assert.deepEqual(apiRequests, [], "the page used HTTP although the Tauri bridge was there")
      assert.deepEqual(tauriProblems, [])
    } finally {
      await tauriPage.close()
    }
  })
})

describe("an npm plugin's two steps against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let npm

  const status = () => fetchSnapshot(server)
  const row = () => sourceRow(page, npm.id)

  before(async () => {
    machine = scratchMachine("npm-steps")
    write(join(machine.project, "opencode.json"), JSON.stringify({ plugin: ["opencode-wakatime@1.3.9"] }))
    // No network: a fetch the page allows fails at once instead of reaching a registry (what
    // the fetch brings is the runtime's own tests'; this one is about what the page sends).
    Object.assign(machine.env, { npm_config_registry: "http://127.0.0.1:9/", npm_config_fetch_retries: "0" })
    server = await startServe(machine)
    npm = (await status()).sources.find((s) => s.kind === "npm-plugin")
    assert.ok(npm, "no npm source in the snapshot")
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("step 1 of 2 shows the runtime's step and offers to allow the fetch, or the fetch and what it brings", async () => {
    assert.equal(npm.state, "pending-approval")
    assert.match(npm.approval.step, /^1 of 2: /)
    const panel = row().getByTestId("approval-panel")
    await panel.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await panel.getAttribute("data-variant"), "fetch")
    assert.equal(await panel.getByTestId("approval-step").textContent(), `Step ${npm.approval.step}`)
    assert.equal(await row().getByTestId("state").innerText(), "Waiting for approval (1 of 2)")
    // Its title is its package and version, not the path of an entry file.
    assert.equal(await row().getByTestId("source-name").innerText(), "opencode-wakatime 1.3.9")
    assert.match(await panel.innerText(), /Allow Berth to fetch this plugin\?/)
    assert.deepEqual(
      await row().locator("button[data-action]").evaluateAll((bs) => bs.map((b) => [b.dataset.action, b.textContent])),
      [["allow", "Allow fetching"], ["allow-including-fetch", "Allow, including what it fetches"], ["deny", "Deny"], ["later", "Later"]],
    )
    assert.deepEqual(problems, [])
  })

  test("“Allow, including what it fetches” sends including_fetch; the audit trail records it for the page", async () => {
    const sent = page.waitForRequest((r) => r.url().endsWith("/api/approve"))
    await row().locator("button[data-action=allow-including-fetch]").click()
    const req = await sent
    assert.deepEqual(req.postDataJSON(), { ids: [npm.id], digests: { [npm.id]: npm.digest }, including_fetch: true })
    // The live event moves the source on: decided, its fetch next (it fails here, offline).
    await page
      .locator(`[data-testid=source][data-source-id="${npm.id}"]:not([data-state="pending-approval"])`)
      .waitFor({ timeout: WAIT })
    assert.equal(await row().getByTestId("approval-panel").count(), 0)
    const approvals = berth(machine, ["approvals"]).approvals.filter((a) => a.source_id === npm.id)
    assert.equal(approvals.length, 1, JSON.stringify(approvals))
    assert.equal(approvals[0].decision, "allow")
    assert.equal(approvals[0].decided_by, "page")
    assert.equal(approvals[0].shown.including_fetch, true, JSON.stringify(approvals[0].shown))
    assert.deepEqual(problems, [])
  })

  test("the Tauri bridge: invoke('approve', {ids, digests, includingFetch: true})", async () => {
    const tauriPage = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    const tauriProblems = watchPage(tauriPage)
    const apiRequests = watchApiRequests(tauriPage)
    try {
      const snap = await status()
      // The snapshot as it was before the decision above: step 1 of 2.
      snap.sources = snap.sources.map((s) => (s.id === npm.id ? npm : s))
      await stubTauriBridge(tauriPage, snap, { hold: true })
      await tauriPage.goto(`${server.origin}/`)
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      await sourceRow(tauriPage, npm.id).locator("button[data-action=allow-including-fetch]").click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 1, null, { timeout: WAIT })
      assert.deepEqual(await tauriPage.evaluate(() => window.__invokes), [
        { cmd: "approve", args: { ids: [npm.id], digests: { [npm.id]: npm.digest }, includingFetch: true } },
      ])
      const progress = sourceRow(tauriPage, npm.id).getByTestId("decision-progress")
      await progress.waitFor({ state: "visible", timeout: WAIT })
      assert.match(await progress.innerText(), /Allowing, with what it fetches/)
      assert.deepEqual(apiRequests, [], "the page used HTTP although the Tauri bridge was there")
      assert.deepEqual(tauriProblems, [])
    } finally {
      await tauriPage.close()
    }
  })
})
