// OpenCode V2 plugins on the status page, in a real browser (Debian's chromium through
// playwright-core), against the real server: each card says which plugin API the plugin is
// written for — read before it ran — and a V2 plugin's tool is listed and answers like any
// other (ledger D-044).
//
// Runs the berth binary from BERTH_BIN (default: target/debug/berth of this repository) on a
// scratch machine; nothing waits on time: every step waits for what the page or server shows.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { copyFileSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import {
  WAIT,
  approveAndLoad,
  berth,
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

describe("OpenCode V1 and V2 plugins against the real server", () => {
  let machine
  let server
  let browser
  let page
  let problems
  const ids = {}

  before(async () => {
    machine = scratchMachine("v2")
    const dir = join(machine.project, ".opencode", "plugins")
    mkdirSync(dir, { recursive: true })
    for (const f of ["promise-tools", "combined"]) copyFileSync(join(repo, "fixtures", "v2", `${f}.ts`), join(dir, `${f}.ts`))
    copyFileSync(join(repo, "fixtures", "plugins", "permission-gate.ts"), join(dir, "permission-gate.ts"))
    // Read before anything runs: the CLI says the generation of each.
    for (const s of berth(machine, ["sources"]).sources) ids[s.capabilities.generation] = s.id
    assert.deepEqual(Object.keys(ids).sort(), ["v1", "v1+v2", "v2"])
    approveAndLoad(machine)
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 900 }))
    await page.locator('[data-testid=tool][data-tool="v2_echo"]').waitFor({ timeout: WAIT })
  })

  after(() => tearDown({ browser, server, machine }))

  test("each card names its generation, and the V2 plugin's tool answers", async () => {
    const tag = (id) => sourceRow(page, id).getByTestId("generation")
    assert.equal(await tag(ids.v1).innerText(), "OpenCode V1")
    assert.equal(await tag(ids.v2).innerText(), "OpenCode V2")
    assert.equal(await tag(ids["v1+v2"]).innerText(), "OpenCode V1 + V2")
    assert.match(await tag(ids["v1+v2"]).getAttribute("title"), /runs its V1 `server`/)
    // The V2 plugin's id, in its technical details.
    const card = sourceRow(page, ids.v2)
    await card.getByText("Technical details").click()
    assert.match(await card.innerText(), /Plugin ID\s+example\.v2-echo/)
    await saveScreenshot(page, "v2-plugins.png")
    const r = await postApi(server, "invoke", { tool: "v2_echo", args: { text: "from the page test" } })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(r.body.output, "v2 echo: from the page test")
    assert.deepEqual(problems, [])
  })
})
