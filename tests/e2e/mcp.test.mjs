// `berth mcp` driven by a real MCP client: the official TypeScript SDK spawns it over stdio,
// lists the approved catalog, calls a tool, follows its progress, cancels a slow call (the
// plugin sees its AbortSignal) and hears `tools/list_changed` when an approval or a denial is
// made through the CLI — no restart of the client.
import { test } from "node:test"
import assert from "node:assert/strict"
import { copyFileSync, existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { WAIT, berth, berthBin, repo, scratchMachine, write } from "./support.mjs"

/** A client connected to `berth mcp` on `machine`, counting list_changed notifications. */
async function connect(machine) {
  const transport = new StdioClientTransport({
    command: berthBin,
    args: ["mcp", "--data-dir", machine.data, "--project", machine.project],
    env: machine.env,
    cwd: machine.project,
    stderr: "pipe",
  })
  let stderr = ""
  transport.stderr?.on("data", (d) => (stderr += d))
  const client = new Client({ name: "berth-e2e", version: "1.0.0" })
  const changes = { count: 0, waiters: [] }
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changes.count += 1
    for (const w of changes.waiters.splice(0)) w()
  })
  await client.connect(transport)
  return { client, changes, stderr: () => stderr }
}

/** Resolves once a list_changed arrived after `seen` of them, and the list satisfies `ok`. */
async function listChanged(c, seen, ok) {
  const until = Date.now() + WAIT
  while (c.changes.count <= seen) {
    assert.ok(Date.now() < until, `no tools/list_changed within ${WAIT} ms; berth said: ${c.stderr()}`)
    await new Promise((r) => {
      c.changes.waiters.push(r)
      setTimeout(r, 200)
    })
  }
  const { tools } = await c.client.listTools()
  assert.ok(ok(tools), `the list after list_changed: ${JSON.stringify(tools.map((t) => t.name))}`)
  return tools
}

async function waitFor(what, check) {
  const until = Date.now() + WAIT
  for (;;) {
    const v = check()
    if (v) return v
    assert.ok(Date.now() < until, `timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

test("an MCP client lists, calls, follows, cancels, and sees approvals without a restart", async () => {
  const machine = scratchMachine("mcp")
  write(join(machine.project, ".opencode", "tools", "probe.ts"), readFileSync(join(repo, "fixtures", "tools", "mcp-probe.ts"), "utf8"))
  const c = await connect(machine)
  try {
    // Nothing is approved: nothing is listed.
    assert.deepEqual((await c.client.listTools()).tools, [])

    // An approval made in another process reaches the connected client.
    const seen = c.changes.count
    berth(machine, ["approve", "--all"])
    const tools = await listChanged(c, seen, (t) => t.length === 3)
    assert.deepEqual(tools.map((t) => t.name), ["probe_echo", "probe_slow", "probe_steps"])
    // The schemas are the ones the model would see through OpenCode (`berth tools`).
    const catalog = berth(machine, ["tools"]).tools
    for (const t of tools) {
      const mine = catalog.find((x) => x.name === t.name)
      assert.equal(t.description, mine.description)
      assert.deepEqual(t.inputSchema, mine.parameters)
    }

    // A call goes through the full path and names its receipt.
    const echoed = await c.client.callTool({ name: "probe_echo", arguments: { text: "hello" } })
    assert.equal(echoed.isError, false)
    const receiptId = echoed._meta["berth/receipt"]
    assert.match(receiptId, /^rcpt_/)
    assert.deepEqual(echoed.content, [
      { type: "text", text: "HELLO" },
      { type: "text", text: `[Berth receipt ${receiptId}]` },
    ])
    const receipts = berth(machine, ["receipts"]).receipts
    const receipt = receipts.find((r) => r.receipt_id === receiptId)
    assert.equal(receipt?.status, "completed", JSON.stringify(receipts))
    assert.equal(receipt.output, "HELLO")

    // Arguments the schema refuses are a tool error that says so, not a crash.
    const refused = await c.client.callTool({ name: "probe_echo", arguments: { text: 42 } })
    assert.equal(refused.isError, true)
    assert.match(refused.content[0].text, /invalid-arguments|text/)

    // What the tool reports with metadata() arrives as progress, in order.
    const progress = []
    const stepped = await c.client.callTool({ name: "probe_steps", arguments: {} }, undefined, {
      onprogress: (p) => progress.push(p.message),
    })
    assert.equal(stepped.content[0].text, "three steps")
    assert.deepEqual(progress, ["step 1", "step 2", "step 3"])

    // Cancelling a call reaches the plugin's AbortSignal, and its receipt says cancelled.
    const marks = join(machine.root, "slow.log")
    const abort = new AbortController()
    const slow = c.client.callTool({ name: "probe_slow", arguments: { file: marks } }, undefined, { signal: abort.signal })
    await waitFor("the slow tool to start", () => existsSync(marks))
    const cancelledAt = Date.now()
    abort.abort("the person stopped it")
    await assert.rejects(slow)
    await waitFor("the plugin to see the abort", () => readFileSync(marks, "utf8").includes("aborted"))
    const abortMs = Date.now() - cancelledAt
    assert.ok(abortMs < 2_000, `the abort reached the plugin after ${abortMs} ms`)
    await waitFor("the receipt to end cancelled", () =>
      berth(machine, ["receipts"]).receipts.find((r) => r.tool === "probe_slow" && r.status === "cancelled"),
    )

    // An unknown name is an error that says what to do.
    await assert.rejects(c.client.callTool({ name: "nope", arguments: {} }), /no approved tool is named `nope`/)

    // A denial withdraws the tools from the connected client.
    const before = c.changes.count
    const id = berth(machine, ["status"]).sources[0].id
    berth(machine, ["deny", id])
    await listChanged(c, before, (t) => t.length === 0)
  } finally {
    await c.client.close()
  }
})

test("stdout of `berth mcp` carries protocol frames only, and a client that leaves ends it", async () => {
  const machine = scratchMachine("mcp-frames")
  write(join(machine.project, ".opencode", "tools", "probe.ts"), readFileSync(join(repo, "fixtures", "tools", "mcp-probe.ts"), "utf8"))
  berth(machine, ["approve", "--all"])
  const { spawn } = await import("node:child_process")
  const child = spawn(berthBin, ["mcp", "--data-dir", machine.data, "--project", machine.project], {
    env: machine.env,
    cwd: machine.project,
    stdio: ["pipe", "pipe", "pipe"],
  })
  let out = ""
  child.stdout.on("data", (d) => (out += d))
  const send = (m) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n")
  send({ id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } })
  await waitFor("the initialize answer", () => out.includes('"id":1'))
  send({ method: "notifications/initialized" })
  send({ id: 2, method: "tools/call", params: { name: "probe_echo", arguments: { text: "x" } } })
  await waitFor("the call's answer", () => out.includes('"id":2'))
  child.stdin.end()
  const code = await new Promise((r) => child.on("exit", r))
  assert.equal(code, 0)
  const lines = out.split("\n").filter((l) => l.trim())
  for (const l of lines) assert.equal(JSON.parse(l).jsonrpc, "2.0", `not a frame on stdout: ${l}`)
  assert.equal(JSON.parse(lines.find((l) => l.includes('"id":2'))).result.content[0].text, "X")
})

test("an agent that calls a tool nobody approved, by its name, runs none of its code", async () => {
  // The attacker's move: skip tools/list and call the name a pending tool file would have.
  const machine = scratchMachine("mcp-unapproved")
  const marker = join(machine.root, "imported")
  write(
    join(machine.project, ".opencode", "tools", "grab.ts"),
    `import { appendFileSync } from "node:fs"\nappendFileSync(${JSON.stringify(marker)}, "imported\\n")\n` +
      `export default { description: "grab", args: {}, async execute() { return "grabbed" } }\n`,
  )
  assert.equal(berth(machine, ["status"]).sources[0].state, "pending-approval")
  const c = await connect(machine)
  try {
    await assert.rejects(c.client.callTool({ name: "grab", arguments: {} }), /no approved tool is named `grab`/)
    // The name sanitizing would give is not a way in either.
    await assert.rejects(c.client.callTool({ name: "grab_2", arguments: {} }), /no approved tool/)
    assert.deepEqual((await c.client.listTools()).tools, [])
  } finally {
    await c.client.close()
  }
  assert.equal(existsSync(marker), false, "the unapproved tool file was imported")
  assert.deepEqual(berth(machine, ["receipts"]).receipts, [])
  // Negative control: once approved, the same call imports it and answers.
  berth(machine, ["approve", "--all"])
  const d = await connect(machine)
  try {
    const r = await d.client.callTool({ name: "grab", arguments: {} })
    assert.equal(r.content[0].text, "grabbed")
  } finally {
    await d.client.close()
  }
  assert.equal(existsSync(marker), true)
})

test("berth serve: the same catalog over streamable HTTP at /mcp, behind the page's token", async () => {
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js")
  const { startServe, stopServe } = await import("./support.mjs")
  const machine = scratchMachine("mcp-http")
  write(join(machine.project, ".opencode", "tools", "probe.ts"), readFileSync(join(repo, "fixtures", "tools", "mcp-probe.ts"), "utf8"))
  const server = await startServe(machine)
  const endpoint = new URL(`${server.origin}/mcp`)
  try {
    // Without the token: refused before any MCP is spoken.
    const bare = await fetch(endpoint, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } }) })
    assert.equal(bare.status, 401)

    const client = new Client({ name: "berth-e2e-http", version: "1.0.0" })
    const changes = { count: 0 }
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changes.count += 1 })
    await client.connect(new StreamableHTTPClientTransport(endpoint, { requestInit: { headers: { authorization: `Bearer ${server.token}` } } }))
    try {
      assert.deepEqual((await client.listTools()).tools, [])
      // An approval made with the CLI reaches the connected HTTP client.
      berth(machine, ["approve", "--all"])
      await waitFor("list_changed over HTTP", () => changes.count > 0)
      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((t) => t.name), ["probe_echo", "probe_slow", "probe_steps"])
      const r = await client.callTool({ name: "probe_echo", arguments: { text: "over http" } })
      assert.equal(r.content[0].text, "OVER HTTP")
      const receipt = r._meta["berth/receipt"]
      assert.match(receipt, /^rcpt_/)
      // The call is Berth's, with its receipt, like every other.
      assert.ok(berth(machine, ["receipts"]).receipts.some((x) => x.receipt_id === receipt && x.status === "completed"))
    } finally {
      await client.close()
    }
  } finally {
    await stopServe(server)
  }
})
