// The policy on the status page, in a real browser (Debian's chromium through playwright-core).
//
// Runs the berth binary from BERTH_BIN (default: target/debug/berth of this repository) as
// `berth serve --json` on a scratch machine whose organisation's policy is a scratch file
// (BERTH_MANAGED_POLICY, for the server and every CLI call) capping model-request hooks at
// `review`. One approval on the page loads a plugin with a `chat.params` hook and a tool; the
// page shows what the cap holds, the policy panel shows every value the runtime resolved, and
// changes made on the page are checked with the real CLI (`berth policy`, `berth hook`) on the
// same HOME and data dir. Nothing waits on time: every step waits for what the page or the
// server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  berth,
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
  waitForRevision,
  watchApiRequests,
  watchPage,
} from "./support.mjs"

// Loading starts a real plugin host (Bun): give it room.
const LOAD_WAIT = 45_000
const HELD = { item: "hook:chat.params", category: "model-request", cap: "review", layer: "organisation" }

/** Chromium logs a refused request (4xx) itself: that is the expected refusal, not a page error. */
const pageErrors = (problems, status) => problems.filter((p) => !p.includes(`status of ${status}`))

describe("policy against the real server, with an organisation's file capping model-request hooks", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let pluginId
  let managed

  const status = () => fetchSnapshot(server)
  const card = (id) => sourceRow(page, id)
  const entryRow = (key) => page.locator(`[data-testid=policy-entry][data-key="${key}"]`)
  /** The refusal shown under a policy entry's row. */
  const entryError = (key) => page.locator(`[data-testid=policy-entry-notes][data-key="${key}"] [data-testid=policy-error]`)
  const heldItem = () => card(pluginId).locator(`[data-testid=limited-item][data-item="${HELD.item}"]`)
  const runHook = () => berth(machine, ["hook", "chat.params", "--input", "{}", "--output", '{"options":{}}'])
  const cliEntry = (key) => berth(machine, ["policy"]).policy.entries.find((e) => e.key === key)

  before(async () => {
    machine = scratchMachine("policy")
    managed = join(machine.root, "managed.json")
    writeFileSync(managed, JSON.stringify({ "cap.model-request": "review" }))
    machine.env.BERTH_MANAGED_POLICY = managed
    // fixtures/plugins/v1-hooks-a.ts: a chat.params hook, a tool.execute.before hook and the tool hooks_a_echo.
    const dir = join(machine.project, ".opencode", "plugins")
    mkdirSync(dir, { recursive: true })
    copyFileSync(join(repo, "fixtures", "plugins", "v1-hooks-a.ts"), join(dir, "v1-hooks-a.ts"))
    server = await startServe(machine)
    const snap = await status()
    pluginId = snap.sources.find((s) => s.entry === join(dir, "v1-hooks-a.ts"))?.id
    assert.ok(pluginId, JSON.stringify(snap.sources.map((s) => s.entry)))
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("one approval on the page: the tool is active and the card says the organisation holds chat.params", async () => {
    await page.evaluate((id) => {
      window.__statesSeen = []
      new MutationObserver(() => {
        const row = document.querySelector(`[data-testid=source][data-source-id="${id}"]`)
        if (row && window.__statesSeen.at(-1) !== row.dataset.state) window.__statesSeen.push(row.dataset.state)
      }).observe(document.getElementById("app"), { childList: true, subtree: true })
    }, pluginId)
    await card(pluginId).locator("button[data-action=allow]").click()
    await card(pluginId).and(page.locator("[data-state=active]")).waitFor({ timeout: LOAD_WAIT })
    await page.locator('[data-testid=tool][data-tool="hooks_a_echo"]').waitFor({ timeout: LOAD_WAIT })
    await heldItem().waitFor({ timeout: LOAD_WAIT })
    const seen = await page.evaluate(() => window.__statesSeen)
    assert.ok(!seen.includes("pending-activation"), `asked a second time: ${seen.join(" → ")}`)

    // What the runtime says: active, the tool registered, only the model-request hook held.
    const snap = await status()
    await waitForRevision(page, snap.revision)
    const s = snap.sources.find((x) => x.id === pluginId)
    assert.equal(s.state, "active")
    assert.deepEqual(s.limited, [HELD])
    assert.ok(snap.tools.some((t) => t.name === "hooks_a_echo"), JSON.stringify(snap.tools))

    // What the card says about it, in words, with the cap's layer.
    assert.equal(await card(pluginId).getByTestId("state").innerText(), "Active")
    assert.equal(await card(pluginId).getByTestId("partially-limited").innerText(), "Partially limited")
    assert.equal(await card(pluginId).locator("[data-testid=limited-item]").count(), s.limited.length)
    const item = heldItem()
    assert.equal(await item.getAttribute("data-cap"), HELD.cap)
    assert.equal(await item.getAttribute("data-layer"), HELD.layer)
    assert.equal(await item.getAttribute("data-category"), HELD.category)
    assert.equal(await item.getByTestId("limited-name").innerText(), "chat.params")
    assert.equal(await item.getByTestId("limited-category").innerText(), "changes what is sent to the model")
    assert.match(await item.getByTestId("limited-why").innerText(), /^Held for review by your organisation’s policy \(cap\.model-request is review\)\.$/)
    assert.equal(await item.locator("button[data-action=grant]").isEnabled(), true)
    assert.match(await card(pluginId).getByTestId("limited").innerText(), /Partially limited\. The policy keeps this from registering; the rest of it is active\./)
    assert.equal(await page.locator("[data-count=limited]").textContent(), "1 partially limited")
    assert.equal(await page.getByTestId("pending-badge").isVisible(), false)
    assert.deepEqual(problems, [])
    await saveScreenshot(page, "policy-partially-limited.png")
  })

  test("the policy panel shows the organisation's file and every value the runtime resolved", async () => {
    const snap = await status()
    await waitForRevision(page, snap.revision)
    const { policy } = snap
    assert.equal(policy.organisation_file, managed)
    assert.equal(policy.organisation_present, true)
    assert.deepEqual(policy.problems, [])
    const panel = page.getByTestId("policy")
    assert.equal(await panel.getByTestId("policy-org-file").innerText(), managed)
    assert.equal(await panel.getByTestId("policy-org").getAttribute("data-present"), "yes")
    assert.equal(await panel.getByTestId("policy-problem").count(), 0)

    // Every entry has its row: value, layer and whether the person may change it, as resolved.
    assert.equal(await panel.locator("[data-testid=policy-entry]").count(), policy.entries.length)
    for (const e of policy.entries) {
      const row = entryRow(e.key)
      assert.equal(await row.getAttribute("data-value"), JSON.stringify(e.value), e.key)
      assert.equal(await row.getAttribute("data-layer"), e.layer, e.key)
      assert.equal(await row.getAttribute("data-changeable"), e.changeable, e.key)
      // (textContent: a folded group's rows are not rendered until it is opened)
      assert.equal(await row.getByTestId("policy-about").textContent(), e.about.replaceAll("`", ""), e.key)
      assert.equal(await row.getByTestId("policy-control").count(), e.changeable === "no" ? 0 : 1, e.key)
      assert.equal(await row.getByTestId("policy-overruled").count(), 0, e.key)
    }

    // The organisation's cap: review, stricter only, "allow" ruled out.
    const cap = policy.entries.find((e) => e.key === "cap.model-request")
    assert.deepEqual([cap.value, cap.layer, cap.changeable], ["review", "organisation", "stricter-only"])
    const row = entryRow("cap.model-request")
    assert.equal(await row.getByTestId("policy-layer").innerText(), "Your organisation’s policy")
    assert.equal(await row.getByTestId("policy-changeable").innerText(), "Only stricter")
    const select = row.locator("select[data-testid=policy-control]")
    assert.equal(await select.inputValue(), "review")
    assert.equal(await select.locator("option[value=allow]").isDisabled(), true)
    assert.equal(await select.locator("option[value=review]").isDisabled(), false)
    assert.equal(await select.locator("option[value=deny]").isDisabled(), false)
    // A product default the person may change: every option is open.
    const shell = entryRow("cap.shell-env")
    assert.deepEqual(
      [await shell.getAttribute("data-value"), await shell.getAttribute("data-layer")],
      [JSON.stringify(policy.entries.find((e) => e.key === "cap.shell-env").value), "product"],
    )
    assert.equal(await shell.locator("option:disabled").count(), 0)
    assert.deepEqual(problems, [])
  })

  test("loosening the organisation's value is refused with policy-limited, and the page shows nothing changed", async () => {
    const before = await status()
    await waitForRevision(page, before.revision)
    const refused = await postApi(server, "policy", { key: "cap.model-request", value: "allow" })
    assert.equal(refused.status, 422, JSON.stringify(refused.body))
    assert.equal(refused.body.error.code, "policy-limited")
    assert.ok(refused.body.error.message.includes(managed), refused.body.error.message)

    // From the page: its request rewritten to the looser value is refused the same way, inline.
    const row = entryRow("cap.model-request")
    await page.route("**/api/policy", (route) =>
      route.continue({ postData: JSON.stringify({ key: "cap.model-request", value: "allow" }) }),
    )
    let answer
    try {
      const response = page.waitForResponse((r) => r.url().endsWith("/api/policy"))
      await row.locator("select[data-testid=policy-control]").selectOption("deny")
      assert.equal((await response).status(), 422)
      answer = (await (await response).json()).error
    } finally {
      await page.unroute("**/api/policy")
    }
    const error = entryError("cap.model-request")
    await error.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await error.getAttribute("data-code"), "policy-limited")
    const text = await error.innerText()
    for (const part of [answer.code, answer.message, answer.recovery]) assert.ok(text.includes(part), text)
    // Focus went back to the control, which shows the value in force again.
    await page.waitForFunction(() => document.activeElement?.dataset?.focusGlobal === "policy:cap.model-request:control", null, { timeout: WAIT })
    assert.equal(await row.locator("select[data-testid=policy-control]").inputValue(), "review")

    // Nothing changed: not in the runtime, not on the page.
    const now = await status()
    assert.deepEqual(now.policy.entries, before.policy.entries)
    assert.deepEqual(now.sources.find((s) => s.id === pluginId).limited, [HELD])
    assert.equal(await row.getAttribute("data-value"), '"review"')
    assert.equal(await row.getAttribute("data-layer"), "organisation")
    assert.equal(await heldItem().count(), 1)
    assert.deepEqual(cliEntry("cap.model-request").layer, "organisation")
    assert.deepEqual(pageErrors(problems, 422), [])
    problems.length = 0
  })

  test("the Tauri bridge: set_policy {key, value} and grant {source, item, granted}, refusals inline", async () => {
    const snap = await status()
    const tauriPage = await browser.newPage({ viewport: { width: 1180, height: 900 } })
    const tauriProblems = watchPage(tauriPage)
    const apiRequests = watchApiRequests(tauriPage)
    try {
      await stubTauriBridge(tauriPage, snap, { hold: true })
      await tauriPage.goto(`${server.origin}/`)
      await tauriPage.waitForSelector("body[data-ready='1']", { timeout: WAIT })
      const row = tauriPage.locator('[data-testid=policy-entry][data-key="cap.ui"]')
      await row.locator("select[data-testid=policy-control]").selectOption("review")
      await tauriPage.waitForFunction(() => window.__invokes.length === 1, null, { timeout: WAIT })
      assert.deepEqual(await tauriPage.evaluate(() => window.__invokes), [{ cmd: "set_policy", args: { key: "cap.ui", value: "review" } }])
      await row.locator("[data-testid=policy-progress][data-phase=sending]").waitFor({ timeout: WAIT })
      assert.equal(await row.locator("select[data-testid=policy-control]").isDisabled(), true)
      const refusal = { code: "policy-limited", capability: "policy", message: "`cap.ui` is bounded", recovery: "ask your administrator", plugin: null }
      await tauriPage.evaluate((e) => window.__answers.set_policy.reject(e), refusal)
      const error = tauriPage.locator('[data-testid=policy-entry-notes][data-key="cap.ui"] [data-testid=policy-error]')
      await error.waitFor({ state: "visible", timeout: WAIT })
      for (const part of [refusal.code, refusal.message, refusal.recovery]) assert.ok((await error.innerText()).includes(part))
      assert.equal(await row.getAttribute("data-value"), JSON.stringify(snap.policy.entries.find((e) => e.key === "cap.ui").value))

      const grant = sourceRow(tauriPage, pluginId).locator(`[data-testid=limited-item][data-item="${HELD.item}"] button[data-action=grant]`)
      await grant.click()
      await tauriPage.waitForFunction(() => window.__invokes.length === 2, null, { timeout: WAIT })
      assert.deepEqual((await tauriPage.evaluate(() => window.__invokes))[1], { cmd: "grant", args: { source: pluginId, item: HELD.item, granted: true } })
      assert.deepEqual(apiRequests, [], "the page used HTTP although the Tauri bridge was there")
      assert.deepEqual(tauriProblems, [])
    } finally {
      await tauriPage.close()
    }
  })

  test("Allow on the card lets the held hook through: the CLI runs it, and the card's list empties", async () => {
    // Held: the plugin's chat.params hook does not run (the CLI loads the plugin on its own).
    assert.deepEqual(runHook().output.options, {})

    const item = heldItem()
    const sent = page.waitForRequest((r) => r.url().endsWith("/api/policy/grant"))
    const answered = page.waitForResponse((r) => r.url().endsWith("/api/policy/grant"))
    await item.locator("button[data-action=grant]").focus()
    await page.keyboard.press("Enter")
    const req = await sent
    assert.deepEqual(req.postDataJSON(), { source: pluginId, item: HELD.item, granted: true })
    assert.equal(req.headers().authorization, `Bearer ${server.token}`)
    assert.equal((await answered).status(), 200)

    // Let through: the same hook chain now runs the plugin's hook.
    const ran = runHook()
    assert.deepEqual(ran.output.options.trail, ["a"], JSON.stringify(ran))

    // The running server publishes the grant by itself (no call needed): the card's list goes.
    await card(pluginId).getByTestId("limited").waitFor({ state: "detached", timeout: WAIT })
    const s = (await status()).sources.find((x) => x.id === pluginId)
    assert.deepEqual(s.limited, [])
    assert.equal(s.state, "active")
    assert.equal(await card(pluginId).getByTestId("partially-limited").count(), 0)
    assert.equal(await page.locator("[data-count=limited]").count(), 0)
    assert.deepEqual(problems, [])
  })

  test("cap.ui set to review in the panel is the person's value for the CLI too; Reset takes it back", async () => {
    const row = entryRow("cap.ui")
    const product = cliEntry("cap.ui")
    assert.deepEqual([product.layer, product.changeable], ["product", "yes"])
    assert.equal(await row.getAttribute("data-layer"), "product")
    assert.equal(await row.getByTestId("policy-reset").count(), 0, "nothing to reset before a setting")

    const sent = page.waitForRequest((r) => r.url().endsWith("/api/policy"))
    await row.locator("select[data-testid=policy-control]").selectOption("review")
    assert.deepEqual((await sent).postDataJSON(), { key: "cap.ui", value: "review" })
    const mine = page.locator('[data-testid=policy-entry][data-key="cap.ui"][data-layer=user]')
    await mine.waitFor({ timeout: WAIT })
    assert.equal(await mine.getAttribute("data-value"), '"review"')
    assert.equal(await mine.getByTestId("policy-layer").innerText(), "Your setting")
    assert.equal(await mine.locator("select[data-testid=policy-control]").inputValue(), "review")
    assert.equal(await mine.getByTestId("policy-progress").count(), 0)
    const set = cliEntry("cap.ui")
    assert.deepEqual([set.value, set.layer], ["review", "user"])

    // Reset, from the keyboard: back to Berth's default, in the runtime and on the page.
    const reset = mine.getByTestId("policy-reset")
    const resetSent = page.waitForRequest((r) => r.url().endsWith("/api/policy"))
    await reset.focus()
    await page.keyboard.press("Enter")
    assert.deepEqual((await resetSent).postDataJSON(), { key: "cap.ui", value: null })
    await page.locator('[data-testid=policy-entry][data-key="cap.ui"][data-layer=product]').waitFor({ timeout: WAIT })
    const back = cliEntry("cap.ui")
    assert.deepEqual([back.value, back.layer], [product.value, "product"])
    assert.equal(await row.getAttribute("data-value"), JSON.stringify(product.value))
    assert.equal(await row.getByTestId("policy-reset").count(), 0)
    assert.deepEqual(problems, [])
  })

  test("a budget Berth cannot take is refused with its code and what to do; the value stays", async () => {
    const before = cliEntry("budget.hook")
    const fold = page.getByTestId("policy-group-budgets")
    if (!(await fold.evaluate((d) => d.open))) await fold.locator("summary").click()
    const row = entryRow("budget.hook")
    const field = row.locator("input[data-testid=policy-control]")
    assert.equal(await field.inputValue(), String(before.value))
    await field.fill("0")
    const response = page.waitForResponse((r) => r.url().endsWith("/api/policy"))
    await field.press("Enter")
    assert.equal((await response).status(), 422)
    const answer = (await (await response).json()).error
    assert.equal(answer.code, "invalid-arguments")
    const error = entryError("budget.hook")
    await error.waitFor({ state: "visible", timeout: WAIT })
    assert.equal(await error.getAttribute("data-code"), "invalid-arguments")
    for (const part of [answer.code, answer.message, answer.recovery]) assert.ok((await error.innerText()).includes(part))
    assert.equal(await row.getAttribute("data-value"), JSON.stringify(before.value))
    assert.deepEqual(cliEntry("budget.hook"), before)

    // A smaller budget is taken: the person's value, shown by the next snapshot.
    await field.fill(String(before.value - 1000))
    await field.press("Enter")
    await page.locator('[data-testid=policy-entry][data-key="budget.hook"][data-layer=user]').waitFor({ timeout: WAIT })
    assert.equal(await row.getAttribute("data-value"), String(before.value - 1000))
    assert.equal(cliEntry("budget.hook").value, before.value - 1000)
    assert.equal(await entryError("budget.hook").count(), 0)
    await row.getByTestId("policy-reset").click()
    await page.locator('[data-testid=policy-entry][data-key="budget.hook"][data-layer=product]').waitFor({ timeout: WAIT })
    assert.deepEqual(pageErrors(problems, 422), [])
    problems.length = 0
  })

  test("the card and the panel say the mode each source runs in and why, from run_mode", async () => {
    const snap = await status()
    await waitForRevision(page, snap.revision)
    for (const s of snap.sources) {
      const mode = card(s.id).getByTestId("run-mode")
      assert.equal(await mode.getAttribute("data-mode"), s.run_mode.mode, s.id)
      assert.equal(await mode.getAttribute("data-layer"), s.run_mode.layer, s.id)
      assert.equal(await mode.getByTestId("run-mode-why").innerText(), s.run_mode.why, s.id)
      const listed = page.locator(`[data-testid=policy-source-mode][data-source-id="${s.id}"]`)
      assert.equal(await listed.getByTestId("policy-source-why").innerText(), s.run_mode.why, s.id)
    }
    const mine = snap.sources.find((s) => s.id === pluginId).run_mode
    assert.deepEqual([mine.mode, mine.layer], ["compatible", "product"])

    // The person asks for restricted: the card says so, with the layer, once Berth does.
    await entryRow("mode").locator("select[data-testid=policy-control]").selectOption("restricted")
    const mode = card(pluginId).locator("[data-testid=run-mode][data-mode=restricted]")
    await mode.waitFor({ timeout: WAIT })
    const now = (await status()).sources.find((s) => s.id === pluginId).run_mode
    assert.deepEqual([now.mode, now.layer], ["restricted", "user"])
    assert.equal(await mode.getByTestId("run-mode-why").innerText(), now.why)
    assert.notEqual(now.why, mine.why)
    // The boundary this machine gives it, as the runtime found it, and its host in the hosts
    // panel: alone, inside that boundary.
    const { boundary } = await status()
    assert.ok(boundary.tier, JSON.stringify(boundary))
    const block = page.getByTestId("policy-boundary")
    assert.equal(await block.getAttribute("data-tier"), boundary.tier)
    assert.equal(await block.locator("[data-testid=policy-boundary-fact][data-fact=Landlock]").innerText(), `ABI ${boundary.landlock_abi}`)
    await block.getByTestId("policy-cannot").locator("summary").click()
    assert.deepEqual(await block.getByTestId("policy-cannot-stop").locator("li").allInnerTexts(), boundary.cannot_stop)
    const boxed = page.locator("[data-testid=host]", { has: page.locator(`[data-testid=host-source][data-source-id="${pluginId}"]`) })
    await boxed.getByTestId("host-boundary").waitFor({ timeout: LOAD_WAIT })
    assert.equal(await boxed.getByTestId("host-boundary").getAttribute("data-tier"), boundary.tier)
    const host = (await status()).hosts.find((h) => h.instances.includes(pluginId))
    assert.deepEqual([host.boundary, host.own], [boundary.tier, pluginId])
    await entryRow("mode").getByTestId("policy-reset").click()
    await card(pluginId).locator("[data-testid=run-mode][data-mode=compatible]").waitFor({ timeout: WAIT })
    assert.deepEqual(problems, [])
    await saveScreenshot(page, "policy-panel.png")
  })
})

describe("an organisation's file with problems, and a setting of the person's it overrules", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let managed

  const entryRow = (key) => page.locator(`[data-testid=policy-entry][data-key="${key}"]`)

  before(async () => {
    machine = scratchMachine("policy-problems")
    managed = join(machine.root, "managed.json")
    machine.env.BERTH_MANAGED_POLICY = managed
    // The person allows config hooks while no organisation's file is there …
    assert.equal(berth(machine, ["policy", "set", "cap.config", "allow"]).set.layer, "user")
    // … then the organisation caps them, with a value Berth cannot read and a key it does not know.
    writeFileSync(managed, JSON.stringify({ "cap.config": "review", "cap.ui": "sometimes", colour: "blue" }))
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("the problems show as the runtime words them; an unreadable value is the strictest and has no control", async () => {
    const { policy, revision } = await fetchSnapshot(server)
    await waitForRevision(page, revision)
    assert.equal(policy.problems.length, 2, JSON.stringify(policy.problems))
    assert.deepEqual(await page.locator("[data-testid=policy-problem]").allTextContents(), policy.problems.map((p) => `policy${p}`))

    const ui = policy.entries.find((e) => e.key === "cap.ui")
    assert.deepEqual([ui.value, ui.layer, ui.changeable], ["deny", "organisation", "no"])
    const row = entryRow("cap.ui")
    assert.equal(await row.getByTestId("policy-control").count(), 0)
    assert.equal(await row.getByTestId("policy-value").innerText(), "deny")
    assert.equal(await row.getByTestId("policy-changeable").innerText(), "No")
    assert.deepEqual(problems, [])
  })

  test("the overruled setting is a warning with its reason; Reset takes it back", async () => {
    const { policy } = await fetchSnapshot(server)
    const config = policy.entries.find((e) => e.key === "cap.config")
    assert.deepEqual([config.value, config.layer, config.changeable], ["review", "organisation", "stricter-only"])
    assert.ok(config.overruled, JSON.stringify(config))
    const row = entryRow("cap.config")
    assert.match(await row.getAttribute("class"), /is-overruled/)
    const warning = page.locator('[data-testid=policy-entry-notes][data-key="cap.config"] [data-testid=policy-overruled]')
    assert.equal(await warning.innerText(), `⚠Overruled: ${config.overruled}`)
    assert.equal(await row.locator("option[value=allow]").isDisabled(), true)

    await row.getByTestId("policy-reset").click()
    await warning.waitFor({ state: "detached", timeout: WAIT })
    const now = berth(machine, ["policy"]).policy.entries.find((e) => e.key === "cap.config")
    assert.equal(now.overruled, undefined, JSON.stringify(now))
    assert.deepEqual([now.value, now.layer], ["review", "organisation"])
    assert.equal(await row.getByTestId("policy-reset").count(), 0)
    assert.deepEqual(problems, [])
  })
})
