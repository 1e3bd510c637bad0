// What a person reads and opens on the page: "Open log folder" and "Open config folder" hand
// Berth's own folders to the desktop's opener (here an `xdg-open` on PATH that writes down what
// it was given, as a file manager the person has not looked at yet), and a known difference
// from OpenCode on a working plugin (D-003, options OpenCode drops and Berth keeps) reads as a
// note, not as a problem with a count on the card.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { chmodSync, existsSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { WAIT, berth, fetchSnapshot, launchBrowser, openPage, saveScreenshot, scratchMachine, sourceRow, startServe, tearDown, write } from "./support.mjs"

describe("folders and notes", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let opened
  let id

  before(async () => {
    machine = scratchMachine("folders")
    opened = join(machine.root, "opened.txt")
    const bin = join(machine.root, "bin")
    write(join(bin, "xdg-open"), `#!/bin/sh\necho "$1" >> "${opened}"\n`)
    chmodSync(join(bin, "xdg-open"), 0o755)
    machine.env.PATH = `${bin}:${machine.env.PATH}`
    // One plugin file, found in the plugins folder and configured with options too (D-003).
    write(join(machine.project, ".opencode", "plugins", "kept.js"), "export const Kept = async () => ({})\n")
    write(join(machine.project, "opencode.json"), JSON.stringify({ plugin: [["./.opencode/plugins/kept.js", { level: 2 }]] }))
    const src = berth(machine, ["sources"]).sources.find((s) => s.kind === "file-plugin")
    id = src.id
    assert.ok(src.diagnostics.some((d) => d.ledger === "D-003"), JSON.stringify(src.diagnostics))
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 1000 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("a ledger notice on a plugin reads as a note, and the card counts no problem for it", async () => {
    const card = sourceRow(page, id)
    const note = card.locator("[data-testid=diagnostic][data-severity=note]")
    await note.first().waitFor({ timeout: WAIT })
    assert.equal(await note.count(), 1)
    assert.equal(await note.locator(".diag-code").innerText(), "Note")
    assert.match(await note.locator(".diag-code").getAttribute("title"), /D-003/)
    assert.match(await note.innerText(), /Berth keeps them/)
    assert.equal(await card.getByTestId("problem-count").count(), 0, "a note is not a problem")
    assert.deepEqual(problems, [])
  })

  test("the first run says what Berth does and that nothing has run yet, until the first decision", async () => {
    const welcome = page.getByTestId("welcome")
    await welcome.waitFor({ timeout: WAIT })
    assert.match(await page.getByTestId("welcome-what").innerText(), /only after you allow it/)
    assert.equal(
      await page.getByTestId("welcome-nothing-ran").innerText(),
      "Nothing has run yet: Berth has read the 1 plugin or tool it found without running it, and waits for your decision on each.",
    )
    // Negative control: the first decision (here from the CLI, on the same data dir) retires it.
    berth(machine, ["approve", id])
    await welcome.waitFor({ state: "detached", timeout: WAIT })
    assert.deepEqual(problems, [])
  })

  test("Open log folder and Open config folder hand Berth's folders to the desktop", async () => {
    const logs = page.getByTestId("open-folder-logs")
    await logs.waitFor({ timeout: WAIT })
    await logs.click()
    await page.getByTestId("folder-opened").waitFor({ timeout: WAIT })
    const dataDir = (await fetchSnapshot(server)).berth.data_dir
    const waitOpened = async (n) => {
      for (let i = 0; i < 100 && !(existsSync(opened) && readFileSync(opened, "utf8").trim().split("\n").length >= n); i++) {
        await new Promise((r) => setTimeout(r, 50))
      }
      return readFileSync(opened, "utf8").trim().split("\n")
    }
    assert.deepEqual(await waitOpened(1), [join(dataDir, "logs")])
    assert.equal(await page.getByTestId("folder-opened").innerText(), `Opened ${join(dataDir, "logs")}`)

    // The global config folder does not exist yet: it is made (empty) and opened.
    assert.equal(existsSync(machine.globalDir), false)
    await page.getByTestId("open-folder-config").click()
    assert.deepEqual(await waitOpened(2), [join(dataDir, "logs"), machine.globalDir])
    assert.ok(statSync(machine.globalDir).isDirectory())
    await saveScreenshot(page, "folders.png")

    // Only the two names open anything: a path is refused.
    const res = await fetch(`${server.origin}/api/open-folder`, {
      method: "POST",
      headers: { Authorization: `Bearer ${server.token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ folder: "/etc" }),
    })
    assert.equal(res.status, 422)
    assert.equal((await res.json()).error.code, "invalid-arguments")
    assert.equal((await waitOpened(2)).length, 2)
    assert.deepEqual(problems, [])
  })
})
