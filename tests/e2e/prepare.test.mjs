// An MCP server started with `npx -y pkg`, prepared from the status page instead: the card says
// what the launcher does, "Prepare in Berth instead" installs the registry's exact version (real
// npm, the test registry on loopback, install scripts off), and the card then shows what runs —
// checked against the CLI on the same data dir. Nothing waits on time.
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { join } from "node:path"
import { berth, launchBrowser, openPage, scratchMachine, sourceRow, startRegistry, startServe, tearDown, write } from "./support.mjs"

const LOAD_WAIT = 60_000

describe("preparing a fetch-and-run MCP server from the page", () => {
  let machine
  let server
  let browser
  let page
  let problems
  let registry
  let id

  before(async () => {
    machine = scratchMachine("prepare")
    registry = await startRegistry(["berth-mcp-fetched@1.0.0"])
    Object.assign(machine.env, { npm_config_registry: registry.url, npm_config_update_notifier: "false" })
    write(join(machine.project, "opencode.json"), JSON.stringify({ mcp: { fetched: { type: "local", command: ["npx", "-y", "berth-mcp-fetched"] } } }))
    id = berth(machine, ["sources"]).sources[0].id
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 1000 }))
  })

  after(async () => {
    await tearDown({ browser, server, machine })
    registry?.stop()
  })

  test("the card says what npx does, and Prepare installs the exact version in Berth", async () => {
    const card = sourceRow(page, id)
    const offer = card.getByTestId("preparable")
    await offer.waitFor({ timeout: LOAD_WAIT })
    assert.match(await offer.innerText(), /npx downloads and runs whatever is newest of berth-mcp-fetched at every start/)
    const sent = page.waitForRequest((r) => r.url().endsWith("/api/prepare"))
    await card.getByTestId("prepare").click()
    assert.deepEqual((await sent).postDataJSON(), { source: id })
    await card.getByTestId("prepared").waitFor({ timeout: LOAD_WAIT })
    assert.equal(await card.getByTestId("prepared-version").innerText(), "berth-mcp-fetched@1.0.0")
    // The same store: the CLI shows what was prepared.
    const src = berth(machine, ["status"]).sources.find((s) => s.id === id)
    assert.equal(src.lifecycle.prepared.version, "1.0.0")
    assert.equal(src.lifecycle.preparable, undefined)
    assert.deepEqual(problems, [])
  })
})
