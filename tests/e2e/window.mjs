// The real Berth window (WebKitGTK under Xvfb) through tauri-driver's W3C WebDriver API.
// Asserts on data the runtime derived (the folder path from this test's HOME, the policy's
// entries as `berth policy` resolves them on the same data dir), on a live update after a
// plugin file appears (the Tauri event path, no reload), on a tool conflict chosen in the window
// (checked with the CLI on the same store), and on the update controls updating a real npm
// plugin from a registry on loopback (the script starts it; REGISTRY_URL), and on a sign-in to
// a remote MCP server from the window (the script's $BROWSER follows the provider's page), and
// on "Open log folder" reaching the desktop's opener (the script's `xdg-open` on PATH).
import { execFileSync, spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { driver, waitFor as waitForIn, screenshot, test, done } from "./wd.mjs"

const [app, port, home, project, dataDir] = process.argv.slice(2)
const wd = driver(port)
const waitFor = (session, script, what, timeoutMs) => waitForIn(wd, session, script, what, timeoutMs)

const session = (
  await wd("POST", "/session", {
    capabilities: {
      alwaysMatch: { "tauri:options": { application: app, args: ["--data-dir", dataDir, "--project", project] } },
    },
  })
).sessionId

try {
  await test("the window shows the config folder derived from HOME and updates live", async () => {
    const globalDir = join(home, ".config", "opencode")
    await waitFor(session, "return document.body.dataset.ready === '1'", "the first snapshot")
    const dirs = await waitFor(
      session,
      "const el = document.querySelector('[data-testid=config-dirs]'); return el && el.textContent",
      "the config folders",
    )
    if (!dirs.includes(globalDir)) throw new Error(`config folders do not show ${globalDir}: ${dirs}`)
    const empty = await wd("POST", `/session/${session}/execute/sync`, {
      script: "return !!document.querySelector('[data-testid=empty-state]')",
      args: [],
    })
    if (!empty) throw new Error("the empty state is not shown on an empty machine")

    const file = join(globalDir, "plugins", "window-live.ts")
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, "export default { id: 'window-live', server: async () => ({}) }\n")
    const state = await waitFor(
      session,
      `const rows = [...document.querySelectorAll('[data-source-id]')];
       const row = rows.find(r => r.textContent.includes(${JSON.stringify(file)}));
       return row && row.dataset.state`,
      "the new plugin to appear without a reload",
    )
    if (state !== "pending-approval") throw new Error(`state is ${state}`)
    await screenshot(wd, session, process.env.WINDOW_SHOT)
  })

  await test("the policy panel shows the runtime's entries and each source's mode in the real window", async () => {
    // The CLI beside the app, on the same HOME and data dir: what the runtime resolved.
    const cli = process.env.BERTH_BIN ?? join(dirname(app), "berth")
    const { policy, sources } = JSON.parse(
      execFileSync(cli, ["policy", "--json", "--data-dir", dataDir, "--project", project], { encoding: "utf8" }),
    )
    const shown = await waitFor(
      session,
      `const rows = [...document.querySelectorAll('[data-testid=policy-entry]')];
       return rows.length > 0 && rows.map((r) => ({
         key: r.dataset.key, value: r.dataset.value, layer: r.dataset.layer, changeable: r.dataset.changeable,
         setBy: r.querySelector('[data-testid=policy-layer]').textContent,
         control: !!r.querySelector('[data-testid=policy-control]'),
       }))`,
      "the policy panel",
    )
    const expected = policy.entries.map((e) => ({
      key: e.key, value: JSON.stringify(e.value), layer: e.layer, changeable: e.changeable,
    }))
    const got = shown.map(({ key, value, layer, changeable }) => ({ key, value, layer, changeable }))
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      throw new Error(`policy rows differ from berth policy:\n${JSON.stringify(got)}\n${JSON.stringify(expected)}`)
    }
    const shell = shown.find((r) => r.key === "cap.shell-env")
    if (!shell || shell.value !== '"review"' || shell.layer !== "product" || shell.setBy !== "Berth\u2019s default" || !shell.control) {
      throw new Error(`cap.shell-env row: ${JSON.stringify(shell)}`)
    }
    const modes = await waitFor(
      session,
      `const rows = [...document.querySelectorAll('[data-testid=policy-source-mode]')];
       return rows.length === ${sources.length} && rows.map((r) => [r.dataset.sourceId, r.dataset.mode,
         r.querySelector('[data-testid=policy-source-why]').textContent])`,
      "each source's mode",
    )
    const wanted = sources.map((s) => [s.id, s.run_mode.mode, s.run_mode.why])
    if (JSON.stringify(modes) !== JSON.stringify(wanted)) {
      throw new Error(`source modes differ from berth policy:\n${JSON.stringify(modes)}\n${JSON.stringify(wanted)}`)
    }
  })

  await test("a tool conflict is chosen in the real window and holds for the CLI", async () => {
    const cli = process.env.BERTH_BIN ?? join(dirname(app), "berth")
    const run = (args) =>
      JSON.parse(execFileSync(cli, [...args, "--json", "--data-dir", dataDir, "--project", project], { encoding: "utf8" }))
    const tools = join(project, ".opencode", "tools")
    const plugins = join(project, ".opencode", "plugins")
    mkdirSync(tools, { recursive: true })
    mkdirSync(plugins, { recursive: true })
    writeFileSync(join(tools, "window_pick.ts"),
      'export default { description: "from the file", args: {}, async execute() { return "file" } }\n')
    writeFileSync(join(plugins, "window-pick.ts"),
      'export default async () => ({ tool: { window_pick: { description: "from the plugin", args: {}, async execute() { return "plugin" } } } })\n')
    const ids = await (async () => {
      const deadline = Date.now() + 15_000
      for (;;) {
        const s = run(["sources"]).sources
        const file = s.find((x) => x.entry.endsWith("/tools/window_pick.ts"))
        const plugin = s.find((x) => x.entry.endsWith("/plugins/window-pick.ts"))
        if (file && plugin) return { file: file.id, plugin: plugin.id }
        if (Date.now() > deadline) throw new Error("the two sources were not found")
        await new Promise((r) => setTimeout(r, 100))
      }
    })()
    run(["approve", ids.file, ids.plugin])
    const conflict = `document.querySelector('[data-testid=conflict][data-tool="window_pick"]')`
    await waitFor(session, `return ${conflict}?.dataset.state === 'asks'`, "the conflict in the window", 60_000)
    await wd("POST", `/session/${session}/execute/sync`, {
      script: `${conflict}.querySelector('[data-testid=conflict-candidate][data-candidate="${ids.file}"] [data-testid=choose]').click(); return true`,
      args: [],
    })
    await waitFor(session, `return ${conflict}?.dataset.state === 'chosen' && ${conflict}.dataset.serving === ${JSON.stringify(ids.file)}`, "the choice in the window", 30_000)
    const c = run(["conflicts"]).conflicts.find((x) => x.tool === "window_pick")
    if (c?.state !== "chosen" || c.serving !== ids.file) throw new Error(`berth conflicts says ${JSON.stringify(c)}`)
  })

  await test("the update controls update an npm plugin from the registry in the real window", async () => {
    const cli = process.env.BERTH_BIN ?? join(dirname(app), "berth")
    const run = (args) =>
      JSON.parse(execFileSync(cli, [...args, "--json", "--data-dir", dataDir, "--project", project], { encoding: "utf8" }))
    writeFileSync(join(home, ".config", "opencode", "opencode.json"), JSON.stringify({ plugin: ["berth-update-probe@latest"] }))
    const id = await (async () => {
      const deadline = Date.now() + 15_000
      for (;;) {
        const s = run(["sources"]).sources.find((x) => x.npm?.name === "berth-update-probe")
        if (s) return s.id
        if (Date.now() > deadline) throw new Error("the npm plugin was not found")
        await new Promise((r) => setTimeout(r, 100))
      }
    })()
    run(["approve", "--including-fetch", id])
    const card = `document.querySelector('[data-testid=source][data-source-id="${id}"]')`
    const version = `(${card}?.querySelector('[data-testid=version-name]')?.textContent)`
    await waitFor(session, `return ${card}?.dataset.state === 'active' && ${version} === '1.0.0'`, "1.0.0 to run in the window", 60_000)
    const res = await fetch(`${process.env.REGISTRY_URL}-/berth/publish`, { method: "POST", body: JSON.stringify({ spec: "berth-update-probe@1.1.0" }) })
    if (res.status !== 200) throw new Error(`publish: ${res.status}`)
    await wd("POST", `/session/${session}/execute/sync`, { script: `${card}.querySelector('[data-testid=update-check]').click(); return true`, args: [] })
    const offered = await waitFor(
      session,
      `return ${card}?.querySelector('[data-testid=update-offer]')?.dataset.version`,
      "the offer of 1.1.0",
      30_000,
    )
    if (offered !== "1.1.0") throw new Error(`offered ${offered}`)
    await wd("POST", `/session/${session}/execute/sync`, { script: `${card}.querySelector('[data-testid=update-update]').click(); return true`, args: [] })
    const why = await waitFor(
      session,
      `return ${card}?.dataset.state === 'active' && ${version} === '1.1.0' && ${card}.querySelector('[data-testid=version-why]').textContent`,
      "1.1.0 to run in the window",
      60_000,
    )
    const versions = run(["versions", id]).versions
    if (versions[0].version !== "1.1.0" || versions[0].why !== why) {
      throw new Error(`the window says ${why}; berth versions says ${JSON.stringify(versions[0])}`)
    }
    if (!versions.some((v) => v.version === "1.0.0" && v.recoverable)) throw new Error(`1.0.0 is not kept: ${JSON.stringify(versions)}`)
  })

  await test("a remote MCP server is signed in to from the real window and its tool works from the CLI", async () => {
    const cli = process.env.BERTH_BIN ?? join(dirname(app), "berth")
    const run = (args) =>
      JSON.parse(execFileSync(cli, [...args, "--json", "--data-dir", dataDir, "--project", project], { encoding: "utf8" }))
    // A real OAuth authorization server (the fixture's `--oauth`); the script's $BROWSER follows
    // the provider's page back to Berth, as a person clicking "Allow" would.
    const fixture = spawn("node", [fileURLToPath(new URL("../../fixtures/mcp/fixture-server.mjs", import.meta.url)), "--http", "0", "--oauth"], {
      stdio: ["ignore", "pipe", "inherit"],
    })
    try {
      const url = await new Promise((r) => createInterface({ input: fixture.stdout }).once("line", (l) => r(JSON.parse(l).url)))
      writeFileSync(join(project, "opencode.json"), JSON.stringify({ mcp: { web: { type: "remote", url } } }))
      const id = await (async () => {
        const deadline = Date.now() + 15_000
        for (;;) {
          const s = run(["sources"]).sources.find((x) => x.kind === "mcp" && x.entry === "web")
          if (s) return s.id
          if (Date.now() > deadline) throw new Error("the MCP server was not found")
          await new Promise((r) => setTimeout(r, 100))
        }
      })()
      run(["approve", id])
      const card = `document.querySelector('[data-testid=source][data-source-id="${id}"]')`
      await waitFor(session, `return !!${card}?.querySelector('[data-testid=sign-in]')`, "Sign in on the card", 30_000)
      await wd("POST", `/session/${session}/execute/sync`, { script: `${card}.querySelector('[data-testid=sign-in]').click(); return true`, args: [] })
      await waitFor(session, `return !!${card}?.querySelector('[data-testid=signed-in]') && ${card}.dataset.state === 'active'`, "the card to say signed in", 30_000).catch(async (e) => {
        const text = await wd("POST", `/session/${session}/execute/sync`, { script: `return ${card}?.innerText`, args: [] })
        throw new Error(`${e.message}; the card says: ${text}`)
      })
      const src = run(["status"]).sources.find((x) => x.id === id)
      if (src.sign_in?.signed_in !== true) throw new Error(`berth status says ${JSON.stringify(src.sign_in)}`)
      const called = run(["invoke", "web_echo", "--args", JSON.stringify({ text: "from the window" })])
      if (called.output !== "from the window") throw new Error(`the call answered ${JSON.stringify(called)}`)
      run(["mcp-logout", id])
    } finally {
      fixture.kill()
    }
  })

  await test("Open log folder in the real window hands Berth's log folder to the desktop", async () => {
    await waitFor(session, "return !!document.querySelector('[data-testid=open-folder-logs]')", "the Open log folder button")
    await wd("POST", `/session/${session}/execute/sync`, { script: "document.querySelector('[data-testid=open-folder-logs]').click(); return true", args: [] })
    await waitFor(session, "return !!document.querySelector('[data-testid=folder-opened]')", "the window to say it opened the folder")
    const deadline = Date.now() + 10_000
    let opened = ""
    while (Date.now() < deadline && !(opened = existsSync(process.env.OPENED_FILE) ? readFileSync(process.env.OPENED_FILE, "utf8").trim() : "")) {
      await new Promise((r) => setTimeout(r, 100))
    }
    if (opened !== join(dataDir, "logs")) throw new Error(`the opener was given ${JSON.stringify(opened)}`)
  })

  await test("the window opens again at the size and place it was left at", async () => {
    await wd("POST", `/session/${session}/window/rect`, { x: 40, y: 30, width: 900, height: 640 })
    const state = join(home, ".config", "dev.berth.desktop", ".window-state.json")
    const deadline = Date.now() + 10_000
    let saved = null
    while (Date.now() < deadline) {
      saved = existsSync(state) ? JSON.parse(readFileSync(state, "utf8")).main : null
      if (saved && saved.width === 900 && saved.height === 640) break
      await new Promise((r) => setTimeout(r, 100))
    }
    if (!saved || saved.width !== 900 || saved.height !== 640) throw new Error(`saved: ${JSON.stringify(saved)}`)
    // The window is killed, not closed (as at a logout): what was saved after the resize holds.
    await wd("DELETE", `/session/${session}`)
    const again = (await wd("POST", "/session", {
      capabilities: { alwaysMatch: { "tauri:options": { application: app, args: ["--data-dir", dataDir, "--project", project] } } },
    })).sessionId
    try {
      await waitFor(again, "return document.body.dataset.ready === '1'", "the window again")
      const rect = await wd("GET", `/session/${again}/window/rect`)
      if (rect.width !== 900 || rect.height !== 640 || rect.x !== saved.x || rect.y !== saved.y) {
        throw new Error(`reopened at ${JSON.stringify(rect)}, left at ${JSON.stringify(saved)}`)
      }
    } finally {
      await wd("DELETE", `/session/${again}`).catch(() => {})
    }
  })
} finally {
  await wd("DELETE", `/session/${session}`).catch(() => {})
}
done()
