// A tool Berth paused on its own, on the status page in a real browser (Debian's chromium
// through playwright-core), against the real server: a tool that times out again and again
// against the policy's tool budget is paused alone (seed 003 §8.3, ledger D-043). Its card says
// "Partly paused" with the tool, the cause and Resume, the source stays active, its sibling
// tool keeps answering, and Resume on the card makes the tool run again.
//
// Runs the berth binary from BERTH_BIN (default: target/debug/berth of this repository) on a
// scratch machine; nothing waits on time: every step waits for what the page or server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { copyFileSync, existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  approveAndLoad,
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
  tearDown,
} from "./support.mjs"

/** Failures in a row after which Berth pauses a tool (catalog/streaks.rs `STREAK`). */
const STREAK = 5

describe("a tool paused on its own against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let toolSource

  const waits = () => postApi(server, "invoke", { tool: "faults_waits", args: {} })
  const card = () => sourceRow(page, toolSource)

  before(async () => {
    machine = scratchMachine("partly-paused")
    const dir = join(machine.project, ".opencode", "tools")
    mkdirSync(dir, { recursive: true })
    copyFileSync(join(repo, "fixtures", "tools", "faults.ts"), join(dir, "faults.ts"))
    ;[toolSource] = approveAndLoad(machine)
    // A short tool budget: `faults_waits` never answers, so every call times out against it.
    berth(machine, ["policy", "set", "budget.tool", "300"])
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
    await page.locator('[data-testid=tool][data-tool="faults_waits"]').waitFor({ timeout: WAIT })
  })

  after(() => tearDown({ browser, server, machine }))

  test("the card says what is paused and why, the rest serves, and Resume runs it again", async () => {
    assert.equal(await card().getByTestId("partly-paused").count(), 0, "nothing paused yet")
    for (let i = 0; i < STREAK; i++) {
      const r = await waits()
      assert.equal(r.status, 200, JSON.stringify(r.body))
      assert.equal(r.body.error?.code, "timeout", `call ${i}: ${JSON.stringify(r.body)}`)
    }
    // The page shows it from the server's own snapshot.
    await card().getByTestId("partly-paused").waitFor({ state: "visible", timeout: WAIT })
    const section = card().getByTestId("paused-parts")
    await section.waitFor({ state: "visible", timeout: WAIT })
    assert.match(await section.innerText(), /Partly paused\./)
    const part = section.getByTestId("paused-part")
    assert.equal(await part.count(), 1)
    assert.equal(await part.getByTestId("paused-part-name").innerText(), "tool faults_waits")
    assert.equal(await part.getAttribute("data-code"), "timeout")
    assert.match(await part.innerText(), new RegExp(`failed ${STREAK} times in a row`))
    // Still active: not the "Paused" of a source whose host spent its restart budget.
    assert.equal(await card().getByTestId("state").innerText(), "Active")
    assert.equal(await page.getByTestId("paused-banner").count(), 0)
    const snap = await fetchSnapshot(server)
    const view = snap.sources.find((s) => s.id === toolSource)
    assert.equal(view.state, "active")
    assert.deepEqual(view.paused_parts.map((p) => p.capability), ["tool faults_waits"])
    await saveScreenshot(page, "partly-paused.png")

    // A new call is refused at once with its code; the sibling tool answers.
    const refused = await waits()
    assert.notEqual(refused.status, 200)
    assert.equal(refused.body.code ?? refused.body.error?.code, "temporarily-unavailable", JSON.stringify(refused.body))
    const file = join(machine.root, "count.txt")
    const counted = await postApi(server, "invoke", { tool: "faults_count", args: { file } })
    assert.equal(counted.body.output, "counted", JSON.stringify(counted.body))
    assert.equal(existsSync(file), true)

    // Resume on the card: the server clears the pause, the card loses it, the tool runs again.
    const request = page.waitForRequest((r) => r.url().endsWith("/api/resume"))
    await section.getByTestId("resume-parts").click()
    await request
    await section.waitFor({ state: "detached", timeout: WAIT })
    assert.equal(await card().getByTestId("partly-paused").count(), 0)
    const again = await waits()
    assert.equal(again.body.error?.code, "timeout", "it ran again: " + JSON.stringify(again.body))
    assert.deepEqual(problems, [])
  })
})
