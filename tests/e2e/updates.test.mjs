// Update controls on the status page, in a real browser, on runtime data: a real `berth serve`,
// real npm installing from a registry on loopback (tests/support/registry.mjs, fixture versions
// published mid-test), real plugin hosts. The page checks, updates to a version within the
// spec, shows a failed update and rolls back to the exact earlier version, and sets the
// plugin's update policy; each step is checked against the server's snapshot and the CLI.
// Nothing waits on time: every step waits for what the page or the server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { join } from "node:path"
import {
  WAIT,
  berth,
  fetchSnapshot,
  launchBrowser,
  openPage,
  repo,
  saveScreenshot,
  scratchMachine,
  sourceRow,
  startRegistry,
  startServe,
  tearDown,
  waitForRevision,
  write,
} from "./support.mjs"

// npm installs and a plugin host start: give them room.
const LOAD_WAIT = 60_000

describe("update controls against the real server and a registry on loopback", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let registry
  let id

  const status = () => fetchSnapshot(server)
  const card = () => sourceRow(page, id)
  const versions = () => card().getByTestId("versions")
  const sourceNow = async () => (await status()).sources.find((s) => s.id === id)
  /** Waits until the server's snapshot satisfies `ok`, then until the page shows that snapshot. */
  async function settle(what, ok, timeout = LOAD_WAIT) {
    const until = Date.now() + timeout
    for (;;) {
      const snap = await status()
      const s = snap.sources.find((x) => x.id === id)
      if (ok(s, snap)) {
        await waitForRevision(page, snap.revision)
        return s
      }
      assert.ok(Date.now() < until, `timed out waiting for ${what}: ${JSON.stringify(s?.lifecycle)} ${s?.state}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  before(async () => {
    machine = scratchMachine("updates")
    registry = await startRegistry(["berth-update-probe@1.0.0"])
    Object.assign(machine.env, { npm_config_registry: registry.url, npm_config_update_notifier: "false" })
    write(join(machine.globalDir, "opencode.json"), JSON.stringify({ plugin: ["berth-update-probe@latest"] }))
    id = berth(machine, ["sources"]).sources[0].id
    berth(machine, ["approve", "--including-fetch", id])
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 1000 }))
    // Every header state the page showed, in order.
    await page.evaluate(() => {
      window.__headerStates = []
      const slot = document.querySelector("[data-testid=header-state]")
      new MutationObserver(() => {
        const text = slot.hidden ? "" : slot.textContent
        if (window.__headerStates.at(-1) !== text) window.__headerStates.push(text)
      }).observe(slot, { attributes: true, childList: true, characterData: true, subtree: true })
    })
  })

  after(async () => {
    await tearDown({ browser, server, machine })
    registry?.stop()
  })

  test("the version that runs and why; nothing was asked of the registry in the background", async () => {
    const s = await settle("1.0.0 to run", (s) => s.state === "active" && s.lifecycle.current?.version === "1.0.0")
    assert.equal(s.lifecycle.updates.policy, "manual")
    assert.equal(s.lifecycle.updates.checked_at_ms, null, "checked without being asked")
    assert.equal(await versions().getByTestId("version-name").innerText(), "1.0.0")
    assert.equal(await versions().getByTestId("version-why").innerText(), "its first load here")
    assert.match(await versions().getByTestId("update-none").innerText(), /Not checked yet/)
    assert.equal(await versions().getByTestId("update-policy").inputValue(), "manual")
  })

  test("Check, then Update: 1.1.0 runs and 1.0.0 stays, with its exact bytes", async () => {
    await registry.publish("berth-update-probe@1.1.0")
    await versions().getByTestId("update-check").click()
    await settle("the check", (s) => s.lifecycle.updates.offer?.available?.version === "1.1.0")
    const offer = versions().getByTestId("update-offer")
    assert.equal(await offer.getAttribute("data-version"), "1.1.0")
    assert.match(await offer.innerText(), /^1\.0\.0 → 1\.1\.0 available, published .+ sha512-/)
    await versions().getByRole("button", { name: "Update to 1.1.0" }).click()
    const s = await settle("1.1.0 to run", (s) => s.state === "active" && s.lifecycle.current?.version === "1.1.0")
    assert.equal(s.lifecycle.current.why, "updated from 1.0.0 to 1.1.0 (you asked for it)")
    assert.equal(await versions().getByTestId("version-name").innerText(), "1.1.0")
    assert.equal(await card().getByTestId("state").innerText(), "Active")
    const seen = await page.evaluate(() => window.__headerStates)
    assert.ok(seen.some((t) => t.startsWith("Updating 1 source")), `the header never said updating: ${JSON.stringify(seen)}`)
    // The earlier version, folded, with what is kept of it.
    await versions().locator("summary", { hasText: "Earlier versions (1)" }).click()
    const item = versions().getByTestId("version-item")
    assert.equal(await item.getAttribute("data-recoverable"), "true")
    assert.match(await item.innerText(), /^1\.0\.0 — its first load here, last ran .+ its exact bytes are kept$/)
    const answer = await fetch(`${server.origin}/api/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
      body: JSON.stringify({ tool: "probe_version", args: {} }),
    }).then((r) => r.json())
    assert.equal(answer.output, "berth-update-probe 1.1.0")
  })

  test("an update whose load fails leaves the plugin unavailable, and Roll back restores 1.1.0 exactly", async () => {
    const good = (await sourceNow()).digest
    await registry.publish("berth-update-probe@1.2.0")
    await versions().getByTestId("update-check").click()
    await settle("the check", (s) => s.lifecycle.updates.offer?.available?.version === "1.2.0")
    await versions().getByRole("button", { name: "Update to 1.2.0" }).click()
    const failed = await settle("the failed update", (s) => s.lifecycle.updates.progress?.stage === "failed")
    assert.equal(failed.state, "load-failed")
    assert.equal(failed.lifecycle.updates.progress.target, "1.2.0")
    await versions().getByTestId("update-failed").waitFor({ timeout: WAIT })
    assert.match(await versions().getByTestId("update-failed").innerText(), /The update to 1\.2\.0 failed: .*did not load.*\n?.*roll back/is)
    assert.equal(await card().getByTestId("state").innerText(), "Failed to load")
    await versions().getByTestId("update-rollback").click()
    const back = await settle("the rollback", (s) => s.state === "active" && s.lifecycle.updates.progress === null)
    assert.equal(back.digest, good, "the exact bytes of 1.1.0 run again")
    assert.equal(back.lifecycle.current.version, "1.1.0")
    assert.match(back.lifecycle.current.why, /^rolled back from 1\.2\.0 to 1\.1\.0/)
    assert.equal(await versions().getByTestId("version-name").innerText(), "1.1.0")
    assert.equal(await versions().getByTestId("update-failed").count(), 0)
    await saveScreenshot(page, "updates-rolled-back.png")
  })

  test("the update policy set on the page is the person's setting for this plugin", async () => {
    await versions().getByTestId("update-policy").selectOption("notify")
    await settle("the policy", (s) => s.lifecycle.updates.policy === "notify" && s.lifecycle.updates.layer === "user")
    const entry = berth(machine, ["policy"]).policy.entries.find((e) => e.key === `updates.${id}`)
    assert.deepEqual([entry?.value, entry?.layer], ["notify", "user"])
    assert.equal(await versions().getByTestId("update-policy").inputValue(), "notify")
    // The failed update's refusal (422) is Chromium's own log line, not a page error.
    assert.deepEqual(problems.filter((p) => !p.includes("status of 422")), [])
  })
})
