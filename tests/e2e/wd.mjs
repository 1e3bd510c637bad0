// A small W3C WebDriver client for the real window tests (tauri-driver), and their test
// runner: each test prints ok / not ok, and `done()` exits non-zero if any failed.

import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"

/** The driver at `port`: `wd(method, path, body)` → the answer's value (throws on an error). */
export function driver(port) {
  const base = `http://127.0.0.1:${port}`
  return async function wd(method, path, body) {
    const res = await fetch(base + path, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    })
    const json = await res.json()
    if (!res.ok) throw new Error(`${method} ${path}: ${JSON.stringify(json.value ?? json)}`)
    return json.value
  }
}

/** Runs `script` in the page until it returns a truthy value (bounded). */
export async function waitFor(wd, session, script, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await wd("POST", `/session/${session}/execute/sync`, { script, args: [] })
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Runs `script` in the page once. */
export function run(wd, session, script) {
  return wd("POST", `/session/${session}/execute/sync`, { script, args: [] })
}

/** Saves the whole X screen to `file` (when given) once the page's latest state is painted. */
export async function screenshot(wd, session, file) {
  // Let the compositor put the updated page on screen before the root window is captured.
  await wd("POST", `/session/${session}/execute/async`, {
    script: "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)))",
    args: [],
  })
  if (!file) return
  mkdirSync(dirname(file), { recursive: true })
  execFileSync("import", ["-window", "root", file])
}

let passed = 0
let failed = 0

export async function test(name, fn) {
  try {
    await fn()
    passed++
    console.log(`ok - ${name}`)
  } catch (e) {
    failed++
    console.log(`not ok - ${name}\n  ${e.stack ?? e}`)
  }
}

export function done() {
  console.log(`${passed} passed, ${failed} failed`)
  process.exit(failed ? 1 : 0)
}
