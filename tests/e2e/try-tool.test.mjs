// "Try it" on a tool, from the page: a form made from the tool's JSON Schema (text, integer,
// number, boolean, a choice, a list, an object as JSON, and raw JSON for the whole), a Run that
// makes a real call through Berth (a receipt the CLI reads back on the same data dir), and a
// Cancel that reaches the running tool's AbortSignal (the tool writes `aborted`).
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { WAIT, berth, launchBrowser, openPage, repo, saveScreenshot, scratchMachine, startServe, tearDown, write } from "./support.mjs"

describe("trying a tool from the page", () => {
  let machine
  let server
  let browser
  let page
  let problems

  const tool = (name) => page.locator(`[data-testid=tool][data-tool="${name}"]`)
  const field = (name, f) => tool(name).locator(`[data-testid=try-input][data-field="${f}"], [data-field="${f}"] [data-testid=try-input]`).first()

  before(async () => {
    machine = scratchMachine("try-tool")
    write(join(machine.project, ".opencode", "tools", "form.ts"), readFileSync(join(repo, "fixtures", "tools", "try-form.ts"), "utf8"))
    write(join(machine.project, ".opencode", "tools", "probe.ts"), readFileSync(join(repo, "fixtures", "tools", "mcp-probe.ts"), "utf8"))
    berth(machine, ["approve", "--all"])
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 1100 }))
  })

  after(() => tearDown({ browser, server, machine }))

  test("the form has a field of the right kind for each argument, and Run shows the receipt", async () => {
    await tool("form").waitFor({ timeout: WAIT })
    await tool("form").getByTestId("tool-try").locator("summary").click()
    const kinds = await tool("form").locator(".try-field").evaluateAll((fs) => fs.map((f) => [f.dataset.field, f.dataset.kind]))
    // In the schema's order as Berth holds it (by name).
    assert.deepEqual(kinds, [["city", "text"], ["days", "integer"], ["metric", "boolean"], ["ratio", "number"], ["tags", "list"], ["unit", "enum"], ["where", "json"]])

    // Not sent while a field cannot be read; nothing was called.
    await field("form", "city").fill("Oslo")
    await field("form", "days").fill("3")
    await field("form", "where").fill("{lat: 1}")
    await tool("form").getByTestId("try-run").click()
    await tool("form").getByTestId("try-invalid").waitFor({ timeout: WAIT })
    assert.match(await tool("form").getByTestId("try-invalid").innerText(), /where is not JSON/)
    assert.equal(berth(machine, ["receipts"]).receipts.length, 0)

    await field("form", "where").fill('{"lat": 59.9, "lon": 10.7}')
    await field("form", "metric").check()
    await field("form", "unit").selectOption("celsius")
    await field("form", "tags").fill("a\nb")
    await tool("form").getByTestId("try-run").click()
    const receipt = tool("form").getByTestId("try-receipt")
    await receipt.waitFor({ timeout: WAIT })
    assert.equal(await receipt.getAttribute("data-status"), "completed")
    const sent = JSON.parse(await tool("form").getByTestId("try-output").innerText())
    assert.deepEqual(sent, { city: "Oslo", days: 3, metric: true, unit: "celsius", tags: ["a", "b"], where: { lat: 59.9, lon: 10.7 } })
    // The receipt is Berth's, stored: the CLI reads the same one.
    const id = await receipt.getAttribute("data-receipt-id")
    const stored = berth(machine, ["receipts"]).receipts.find((r) => r.receipt_id === id)
    assert.equal(stored.tool, "form")
    assert.equal(stored.status, "completed")
    await saveScreenshot(page, "try-tool.png")

    // Raw JSON starts from what the form holds, and what it says is what is sent.
    await tool("form").getByTestId("try-raw-mode").check()
    const raw = tool("form").getByTestId("try-raw")
    assert.deepEqual(JSON.parse(await raw.inputValue()), sent)
    await raw.fill('{"city": "Bergen", "days": 1}')
    await tool("form").getByTestId("try-run").click()
    await page.waitForFunction(() => {
      const out = document.querySelector('[data-tool="form"] [data-testid=try-output]')
      return out && out.textContent.includes("Bergen")
    }, null, { timeout: WAIT })
    assert.deepEqual(JSON.parse(await tool("form").getByTestId("try-output").innerText()), { city: "Bergen", days: 1 })

    // The tool's own refusal is a receipt too: a wrong type reaches the schema check.
    await raw.fill('{"city": 7, "days": 1}')
    await tool("form").getByTestId("try-run").click()
    await page.waitForFunction(() => document.querySelector('[data-tool="form"] [data-testid=try-receipt]')?.dataset.status === "failed", null, { timeout: WAIT })
    assert.deepEqual(problems, [])
  })

  test("Cancel reaches the running tool's AbortSignal and the receipt ends cancelled", async () => {
    const file = join(machine.root, "slow.txt")
    await tool("probe_slow").getByTestId("tool-try").locator("summary").click()
    await field("probe_slow", "file").fill(file)
    await tool("probe_slow").getByTestId("try-run").click()
    const cancel = tool("probe_slow").getByTestId("try-cancel")
    await cancel.waitFor({ timeout: WAIT })
    for (let i = 0; i < 200 && !(existsSync(file) && readFileSync(file, "utf8").includes("started")); i++) await new Promise((r) => setTimeout(r, 25))
    assert.match(readFileSync(file, "utf8"), /started/)
    // Recent calls says where the open call is.
    const running = page.locator('[data-testid=call][data-status=running][data-tool="probe_slow"]')
    await running.waitFor({ timeout: WAIT })
    assert.equal(await running.getByTestId("call-status").innerText(), "Running in the plugin")
    await cancel.click()
    const receipt = tool("probe_slow").getByTestId("try-receipt")
    await receipt.waitFor({ timeout: WAIT })
    assert.equal(await receipt.getAttribute("data-status"), "cancelled")
    assert.equal(readFileSync(file, "utf8"), "started\naborted\n")
    assert.deepEqual(problems, [])
  })
})
