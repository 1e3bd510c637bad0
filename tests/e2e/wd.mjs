// A small W3C WebDriver client for the real window tests (tauri-driver), and their test
// runner: each test prints ok / not ok, and `done()` exits non-zero if any failed.

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
