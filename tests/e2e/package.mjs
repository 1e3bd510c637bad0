// The installed app (package-e2e.sh starts its driver with the checkout hidden, an empty HOME
// and PATH=/usr/bin:/bin): started with no arguments it opens on the project picker and shows
// what applies to every project; a project opened through the picker's folder dialog shows its
// sources, one is approved and its tools load on the package's own host files; a second launch
// with `--project OTHER` (or a bare folder, as a file manager passes it) switches the one
// running window; a notification reaches the person while the window is not in front.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { dirname, join } from "node:path"
import { driver, waitFor as waitForIn, run as runIn, screenshot, test, done } from "./wd.mjs"

const [app, port, scratch, ...execArgs] = process.argv.slice(2)
const wd = driver(port)
const home = join(scratch, "home")
const project = join(scratch, "project")
const other = join(scratch, "other")
const waitFor = (script, what, timeoutMs) => waitForIn(wd, session, script, what, timeoutMs)
const inPage = (script) => runIn(wd, session, script)
const text = (testid) => `document.querySelector('[data-testid=${testid}]')?.textContent`
const notified = () => readFileSync(process.env.NOTIFY_LOG, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
const appProcesses = () =>
  spawnSync("pgrep", ["-x", "berth-app"], { encoding: "utf8" }).stdout.split("\n").filter(Boolean)

const session = (
  await wd("POST", "/session", { capabilities: { alwaysMatch: { "tauri:options": { application: app, args: execArgs } } } })
).sessionId

try {
  await test("started as the menu starts it, the installed app opens on the project picker", async () => {
    await waitFor("return document.body.dataset.ready === '1'", "the first snapshot", 30_000)
    const none = await waitFor(`return ${text("no-project")}`, "the picker's no-project text")
    if (!none.includes("apply to every project")) throw new Error(`the picker says ${JSON.stringify(none)}`)
    const header = await inPage("return document.getElementById('project-path').textContent")
    if (header !== "no project open") throw new Error(`the header says ${JSON.stringify(header)}`)
  })

  await test("with no project open, a tool that applies to every project appears", async () => {
    const file = join(home, ".config", "opencode", "tools", "everywhere.ts")
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, 'export default { description: "Everywhere", args: {}, async execute() { return "here" } }\n')
    await waitFor(
      `return [...document.querySelectorAll('[data-testid=source]')].some((c) => c.textContent.includes(${JSON.stringify(file)}))`,
      "the global tool's card",
    )
  })

  await test("a project opened through the folder dialog shows its sources; one approved, its tools load", async () => {
    await inPage("document.querySelector('[data-testid=open-folder-dialog]').click(); return true")
    const current = await waitFor(`return ${text("project-current")}`, "the opened project")
    if (!current.includes(project)) throw new Error(`the picker says ${JSON.stringify(current)}`)
    const card = `[...document.querySelectorAll('[data-testid=source]')].find((c) => c.querySelector('[data-testid=source-entry]')?.textContent.endsWith('/.opencode/tools/weather.ts'))`
    await waitFor(`return ${card}?.dataset.state === 'pending-approval'`, "the project's weather tool, waiting for approval")
    await inPage(`${card}.querySelector('[data-action=allow]').click(); return true`)
    const tools = await waitFor(
      `const t = [...document.querySelectorAll('[data-testid=tool]')].map((e) => e.dataset.tool); return t.includes('weather') && t`,
      "the weather tool to load in the installed host",
      90_000,
    )
    if (!tools.includes("weather_forecast")) throw new Error(`tools: ${tools}`)
    await screenshot(wd, session, process.env.PACKAGE_SHOT)
  })

  await test("a second launch with --project OTHER switches the running window (one process)", async () => {
    const before = appProcesses()
    if (before.length !== 1) throw new Error(`berth-app processes before: ${before}`)
    const second = spawnSync(process.env.AS_INSTALLED, [app, "--project", other], { encoding: "utf8", timeout: 30_000 })
    if (second.status !== 0) throw new Error(`the second launch ended with ${second.status}: ${second.stderr}`)
    const current = await waitFor(`const t = ${text("project-current")}; return t && t.includes(${JSON.stringify(other)}) && t`, "the other project in the window")
    if (!current.includes(other)) throw new Error(current)
    await waitFor(
      `return [...document.querySelectorAll('[data-testid=source-entry]')].some((e) => e.textContent.endsWith('/other_tool.ts'))`,
      "the other project's tool",
    )
    const after = appProcesses()
    if (JSON.stringify(after) !== JSON.stringify(before)) throw new Error(`berth-app processes: ${before} then ${after}`)
    const recent = await waitFor(
      `return [...document.querySelectorAll('[data-testid=recent-project]')].map((e) => e.dataset.path).join('\\n')`,
      "the recent projects",
    )
    if (!recent.split("\n").includes(project)) throw new Error(`recent: ${recent}`)
    // A folder handed over bare, as a file manager's "Open with Berth" does (Exec=berth-app %F).
    const third = spawnSync(process.env.AS_INSTALLED, [app, project], { encoding: "utf8", timeout: 30_000 })
    if (third.status !== 0) throw new Error(`the folder launch ended with ${third.status}: ${third.stderr}`)
    await waitFor(`const t = ${text("project-current")}; return t && t.includes(${JSON.stringify(project)})`, "the first project again")
    // And back to the other one from the recent list, in the window.
    await waitFor(`return [...document.querySelectorAll('[data-testid=recent-project]')].some((e) => e.dataset.path === ${JSON.stringify(other)})`, "the other project among the recent ones")
    await inPage(`[...document.querySelectorAll('[data-testid=recent-project]')].find((e) => e.dataset.path === ${JSON.stringify(other)}).querySelector('[data-testid=open-recent]').click(); return true`)
    await waitFor(`const t = ${text("project-current")}; return t && t.includes(${JSON.stringify(other)})`, "the other project, opened from the recent list")
  })

  await test("while the window is not in front, a tool that starts waiting is notified; the click shows it", async () => {
    const tools = join(other, ".opencode", "tools")
    const cardOf = (file) => `[...document.querySelectorAll('[data-testid=source]')].find((c) => c.querySelector('[data-testid=source-entry]')?.textContent.endsWith('/${file}'))`
    // In front: nothing is sent.
    writeFileSync(join(tools, "seen_here.ts"), 'export default { description: "Seen", args: {}, async execute() { return "x" } }\n')
    await waitFor(`return !!${cardOf("seen_here.ts")}`, "the tool while the window is in front")
    await new Promise((r) => setTimeout(r, 1000))
    if (notified().length) throw new Error(`sent while in front: ${JSON.stringify(notified())}`)
    // Away: the person turns to another window (an image viewer here), which takes the focus.
    const viewer = spawn("display", ["-title", "berth-elsewhere", "-geometry", "120x90+1150+700", "xc:gray"], { stdio: "ignore" })
    try {
      execFileSync("xdotool", ["search", "--sync", "--name", "berth-elsewhere", "windowfocus", "--sync"], { timeout: 15_000 })
      writeFileSync(join(tools, "late_tool.ts"), 'export default { description: "Late", args: {}, async execute() { return "x" } }\n')
      const id = await waitFor(`return ${cardOf("late_tool.ts")}?.dataset.sourceId`, "the late tool")
      const deadline = Date.now() + 15_000
      let sent = []
      while (!(sent = notified()).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
      if (sent.length !== 1 || sent[0].summary !== "late_tool.ts waits for your approval" || !sent[0].actions.includes("default")) {
        throw new Error(`notifications: ${JSON.stringify(sent)}`)
      }
      await waitFor(`return document.body.dataset.shownItem === ${JSON.stringify("source:" + id)}`, "the window to show the tool after the click")
    } finally {
      viewer.kill()
    }
  })

  await test("a permission prompt opened while the window is not in front is notified; the click shows it", async () => {
    const plugins = join(other, ".opencode", "plugins")
    mkdirSync(plugins, { recursive: true })
    copyFileSync(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures", "plugins", "permission-gate.ts"), join(plugins, "permission-gate.ts"))
    const card = `[...document.querySelectorAll('[data-testid=source]')].find((c) => c.querySelector('[data-testid=source-entry]')?.textContent.endsWith('/permission-gate.ts'))`
    await waitFor(`return ${card}?.dataset.state === 'pending-approval'`, "the plugin that asks, waiting for approval")
    await inPage(`${card}.querySelector('[data-action=allow]').click(); return true`)
    const tool = `document.querySelector('[data-testid=tool][data-tool=guarded_write]')`
    await waitFor(`return !!${tool}`, "its tool to load", 60_000)
    await inPage(`${tool}.querySelector('[data-testid=tool-try] summary').click(); return true`)
    const target = join(scratch, "guarded.txt")
    await waitFor(`const i = ${tool}.querySelector('[data-testid=try-input]'); if (!i) return false;
      i.value = ${JSON.stringify(target)}; i.dispatchEvent(new Event('input', { bubbles: true })); return true`, "the form")
    const viewer = spawn("display", ["-title", "berth-elsewhere-2", "-geometry", "120x90+1150+700", "xc:gray"], { stdio: "ignore" })
    try {
      execFileSync("xdotool", ["search", "--sync", "--name", "berth-elsewhere-2", "windowfocus", "--sync"], { timeout: 15_000 })
      const before = notified().length
      await inPage(`${tool}.querySelector('[data-testid=try-run]').click(); return true`)
      const id = await waitFor(`return document.querySelector('[data-testid=prompt]')?.dataset.promptId`, "the permission prompt")
      const deadline = Date.now() + 15_000
      let sent = []
      while ((sent = notified().slice(before).filter((n) => n.summary.includes("asks for permission"))).length === 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100))
      }
      if (sent.length !== 1 || sent[0].summary !== "guarded_write asks for permission") throw new Error(`notifications: ${JSON.stringify(notified())}`)
      await waitFor(`return document.body.dataset.shownItem === ${JSON.stringify("prompt:" + id)}`, "the window to show the prompt after the click")
    } finally {
      viewer.kill()
    }
  })
} finally {
  await wd("DELETE", `/session/${session}`).catch(() => {})
}
done()
