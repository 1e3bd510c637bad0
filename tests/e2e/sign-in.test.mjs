// A remote MCP server that asks for a sign-in, signed in to from the status page: the card says
// the server may ask and offers "Sign in"; Berth opens the provider's page in the browser
// ($BROWSER here only writes the address down, as a browser the person has not looked at yet)
// and the card waits with a link to that page; following it (as the person clicking "Allow")
// finishes the sign-in, the card says so, and the server's tool works from the CLI on the same
// data dir; "Sign out" makes the server ask again. The fixture server is a real OAuth
// authorization server (`fixtures/mcp/fixture-server.mjs --oauth`).
import { after, before, describe, test } from "node:test"
import assert from "node:assert/strict"
import { spawn } from "node:child_process"
import { chmodSync, existsSync, readFileSync } from "node:fs"
import { createInterface } from "node:readline"
import { join } from "node:path"
import { WAIT, berth, launchBrowser, openPage, repo, saveScreenshot, scratchMachine, sourceRow, startServe, tearDown, write } from "./support.mjs"

function startOAuthServer(log) {
  const child = spawn("node", [join(repo, "fixtures", "mcp", "fixture-server.mjs"), "--http", "0", "--oauth"], {
    env: { ...process.env, MCP_FIXTURE_LOG: log },
    stdio: ["ignore", "pipe", "inherit"],
  })
  return new Promise((resolve) => {
    createInterface({ input: child.stdout }).once("line", (line) => resolve({ child, url: JSON.parse(line).url }))
  })
}

describe("signing in to a remote MCP server from the page", () => {
  let machine
  let fixture
  let server
  let browser
  let page
  let problems
  let id
  let opened

  before(async () => {
    machine = scratchMachine("sign-in")
    fixture = await startOAuthServer(join(machine.root, "oauth.log"))
    opened = join(machine.root, "opened.txt")
    write(join(machine.root, "browser.sh"), `#!/bin/sh\necho "$1" > "${opened}"\n`)
    chmodSync(join(machine.root, "browser.sh"), 0o755)
    machine.env.BROWSER = join(machine.root, "browser.sh")
    write(join(machine.project, "opencode.json"), JSON.stringify({ mcp: { web: { type: "remote", url: fixture.url } } }))
    id = berth(machine, ["sources"]).sources.find((s) => s.entry === "web").id
    berth(machine, ["approve", id])
    server = await startServe(machine)
    browser = await launchBrowser()
    ;({ page, problems } = await openPage(browser, server.url, { width: 1180, height: 1000 }))
  })

  after(async () => {
    berth(machine, ["mcp-logout", id])
    await tearDown({ browser, server, machine })
    fixture?.child.kill()
  })

  test("Sign in waits for the browser, finishes there, and Sign out asks again", async () => {
    const card = sourceRow(page, id)
    const ask = card.getByTestId("not-signed-in")
    await ask.waitFor({ timeout: WAIT })
    assert.match(await ask.innerText(), /127\.0\.0\.1:\d+ may ask you to sign in/)
    // The server's refusal is on the card with the way out.
    assert.match(await card.innerText(), /asks you to sign in/)

    const sent = page.waitForRequest((r) => r.url().includes("/api/mcp-sign-in"))
    await card.getByTestId("sign-in").click()
    assert.deepEqual((await sent).postDataJSON(), { source: id })
    const waiting = card.getByTestId("sign-in-waiting")
    await waiting.waitFor({ timeout: WAIT })
    await saveScreenshot(page, "sign-in-waiting.png")
    // The page Berth opened is the one the card links to.
    const until = Date.now() + WAIT
    while (!existsSync(opened)) {
      assert.ok(Date.now() < until, "Berth opened no browser page")
      await new Promise((r) => setTimeout(r, 20))
    }
    const href = await card.getByTestId("sign-in-link").getAttribute("href")
    assert.equal(href, readFileSync(opened, "utf8").trim())
    assert.match(href, /\/authorize\?/)

    // The person allows it: the provider sends the browser back to Berth.
    const consent = await fetch(href, { redirect: "manual" })
    assert.equal(consent.status, 302)
    const back = await fetch(consent.headers.get("location"))
    assert.match(await back.text(), /Signed in to MCP server/)
    const signed = card.getByTestId("signed-in")
    await signed.waitFor({ timeout: WAIT })
    assert.match(await signed.innerText(), /Signed in to 127\.0\.0\.1:\d+/)
    await saveScreenshot(page, "signed-in.png")

    // The same store and keyring: the CLI calls the server's tool with the token.
    const called = berth(machine, ["invoke", "web_echo", "--args", JSON.stringify({ text: "from the page" })])
    assert.equal(called.output, "from the page")
    // The token never reaches the page.
    const log = readFileSync(join(machine.root, "oauth.log"), "utf8")
    const [access, refresh] = log.split("\n").find((l) => l.startsWith("issued ")).split(" ").slice(1)
    const html = await page.content()
    assert.ok(!html.includes(access) && !html.includes(refresh))

    await card.getByTestId("sign-out").click()
    await card.getByTestId("not-signed-in").waitFor({ timeout: WAIT })
    assert.equal(berth(machine, ["status"]).sources.find((s) => s.id === id).sign_in.signed_in, false)
    assert.deepEqual(problems, [])
  })
})
