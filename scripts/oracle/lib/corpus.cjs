// Shared code for scripts/oracle/record-corpus: load one real npm plugin (pinned by exact version,
// listed in fixtures/corpus/corpus.json) in the real OpenCode 1.18.4 and describe what happened.
//
// One isolated case per package (temp HOME/XDG dirs as in discovery.cjs prepareCase, git-initialised
// project whose opencode.json adds `"plugin": ["<spec>"]` to the mock provider of fixtures/corpus/case/),
// except that the npm registry is the one npm is configured with (OpenCode installs the plugin itself)
// and XDG_CACHE_HOME is the persistent .tools/corpus-cache, so OpenCode's package cache
// (.tools/corpus-cache/opencode/packages/) survives between runs. Then:
//   1. `opencode serve --print-logs`; `GET /global/event` (SSE) is followed from before the instance exists;
//   2. GET /experimental/tool (+ /tool/ids, /provider/auth, /config) for the project, and the same for a
//      plugin-less "baseline" project on the same server (built-in descriptions, built-in auth methods);
//   3. the hook probe (PROBE_SOURCE below) on OpenCode's own Bun runtime (BUN_BE_BUN=1 opencode), which
//      imports the entry OpenCode resolved in OpenCode's install dir and calls the factories as OpenCode does.
// Load failures are not in any HTTP answer: OpenCode 1.18.4 publishes them as `session.error` bus events
// ("Failed to install plugin …", "Failed to load plugin …", "Plugin … skipped: …") and logs a throwing factory
// as `level=ERROR message="failed to load plugin" path=<spec> error=…`. A spec naming one of the
// hard-coded deprecated packages is dropped silently, and so is an npm package whose `exports` object
// has no "./server" and that has no `main` ("does not expose a server entrypoint", reported to nobody).
"use strict"

const fs = require("node:fs")
const path = require("node:path")
const { spawn, spawnSync } = require("node:child_process")
const lib = require("./discovery.cjs")
const { startServer } = require("./server.cjs")
const { sleep, curl, killGroup, groupAlive } = require("./proc.cjs")

const ROOT = lib.ROOT
const CORPUS_FILE = path.join(ROOT, "fixtures", "corpus", "corpus.json")
const CASE_SRC = path.join(ROOT, "fixtures", "corpus", "case")
const OUT_DIR = path.join(ROOT, "tests", "oracle", "corpus")
const BASELINE = path.join(ROOT, "tests", "oracle", "discovery", "_baseline.json")
// XDG_CACHE_HOME of every case; OpenCode keeps its npm installs in <this>/opencode/packages/.
const CACHE_ROOT = path.join(ROOT, ".tools", "corpus-cache")
const SDK_CLIENT = path.join(ROOT, ".tools", "host-deps", "node_modules", "@opencode-ai", "sdk", "dist", "client.js")
const PROVIDER = "mock"
const MODEL = "mock-model"
// OpenCode 1.18.4 drops every spec that contains one of these names (its built-in replacements).
const DEPRECATED = ["opencode-openai-codex-auth", "opencode-copilot-auth"]
// The keys of the Hooks interface of @opencode-ai/plugin 1.18.4 (dist/index.d.ts). A factory's result is
// kept by OpenCode whatever its keys; keys outside this list are recorded as other_keys.
const HOOK_NAMES = new Set([
  "auth", "chat.headers", "chat.message", "chat.params", "command.execute.before", "config", "dispose", "event",
  "experimental.chat.messages.transform", "experimental.chat.system.transform", "experimental.compaction.autocontinue",
  "experimental.provider.small_model", "experimental.session.compacting", "experimental.text.complete",
  "permission.ask", "provider", "shell.env", "tool", "tool.definition", "tool.execute.after", "tool.execute.before",
])
const INSTALL_SECONDS = 300
const PROBE_MS = 60000

const clip = (s, n = 600) => (typeof s === "string" && s.length > n ? s.slice(0, n) + `… (${s.length - n} more chars)` : s)
const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, "")
const sortedObject = (o) => Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]))

function readCorpus() {
  return JSON.parse(fs.readFileSync(CORPUS_FILE, "utf8"))
}

/** "name@1.2.3" / "@scope/name@1.2.3" -> { name, version } (exact versions only). */
function parseSpec(spec) {
  const at = spec.lastIndexOf("@")
  if (at <= 0) throw new Error(`spec must be name@exact-version: ${spec}`)
  const name = spec.slice(0, at)
  const version = spec.slice(at + 1)
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) throw new Error(`spec must pin an exact version: ${spec}`)
  return { name, version }
}

/** File name of a recording: "@scope/name" -> "scope__name". */
function sanitisedName(name) {
  return name.replace(/^@/, "").replace(/\//g, "__")
}

/** The registry npm is configured with (only used to write it as <registry> in recordings). */
let registryCache
function npmRegistry() {
  if (registryCache === undefined) {
    const r = spawnSync("npm", ["config", "get", "registry"], { encoding: "utf8" })
    registryCache = (r.stdout || "").trim().replace(/\/+$/, "")
  }
  return registryCache
}

/** OpenCode's install dir for name@version under the persistent cache (undefined when not installed). */
function installDir(name, version) {
  const packages = path.join(CACHE_ROOT, "opencode", "packages")
  if (!fs.existsSync(packages)) return undefined
  const found = []
  // packages/<name>@<version>/ (scoped: packages/@scope/<name>@<version>/), holding node_modules/<name>
  const visit = (dir, depth) => {
    const pj = path.join(dir, "node_modules", ...name.split("/"), "package.json")
    if (fs.existsSync(pj)) {
      try {
        if (JSON.parse(fs.readFileSync(pj, "utf8")).version === version) found.push(dir)
      } catch {}
      return
    }
    if (depth > 0)
      for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1)))
        if (e.isDirectory() && e.name !== "node_modules") visit(path.join(dir, e.name), depth - 1)
  }
  visit(packages, 2)
  return found.find((d) => path.basename(d).endsWith(`@${version}`)) ?? found[0]
}

/**
 * OpenCode 1.18.4's server entry for an npm package dir (read from the bundled loader):
 * exports["./server"] (string, or its `import`/`default`), else `main`, else — if `exports` is an object —
 * nothing ("missing", silently skipped), else the package directory itself (Bun resolves it on import).
 * Returns { entry (what is passed to import()), shown (relative, for the recording) } or { missing: true }.
 */
function serverEntry(pkgDir) {
  const json = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"))
  const isPlain = (v) => typeof v === "object" && v !== null && !Array.isArray(v)
  const pick = (v) => {
    if (typeof v === "string") return v
    if (!isPlain(v)) return undefined
    for (const k of ["import", "default"]) if (typeof v[k] === "string") return v[k]
    return undefined
  }
  const resolveIn = (rel, field) => {
    const abs = path.resolve(pkgDir, rel)
    if (abs !== pkgDir && !abs.startsWith(pkgDir + path.sep)) throw new Error(`entry outside package dir (${field})`)
    return { entry: require("node:url").pathToFileURL(abs).href, shown: path.relative(pkgDir, abs), field }
  }
  if (isPlain(json.exports)) {
    const s = pick(json.exports["./server"])
    if (s) return resolveIn(s, 'exports["./server"]')
  }
  const main = typeof json.main === "string" ? json.main.trim() : ""
  if (main) return resolveIn(main, "main")
  if (isPlain(json.exports)) return { missing: true }
  return { entry: pkgDir, shown: ".", field: "package directory (resolved by Bun)" }
}

/** Size and package count of an install dir. */
function installedInfo(dir) {
  const du = spawnSync("du", ["-sb", dir], { encoding: "utf8" })
  const bytes = Number((du.stdout || "0").split(/\s/)[0])
  let packages
  try {
    const lock = JSON.parse(fs.readFileSync(path.join(dir, "package-lock.json"), "utf8"))
    packages = Object.keys(lock.packages ?? {}).filter((k) => k.startsWith("node_modules/")).length
  } catch {}
  return { packages, megabytes: Math.round(bytes / 1e5) / 10 }
}

// The hook probe. Runs on OpenCode's own runtime (`BUN_BE_BUN=1 opencode probe.mjs in.json`, Bun 1.3.14),
// cwd = the project, env = the case env. It builds a PluginInput like OpenCode's Plugin service does
// (client = the v1 SDK client of @opencode-ai/sdk 1.18.4 pointed at the live server, project = the
// server's /project/current, $ = Bun.$), imports the entry string OpenCode imports, then mirrors the loader:
// v1 (default export is a plain object with id/server/tui) -> server(input, options); legacy -> every
// export value, in module-namespace order, deduplicated by identity, each a function or {server: function},
// else the whole module fails with "Plugin export is not a function"; factories are awaited one after the
// other, and the first throw stops the rest (OpenCode keeps the hooks of the factories before it).
// It lists what each factory returned: property names (own and inherited, as OpenCode reads them by name),
// the `tool` keys, `auth.provider` with its method types/labels, `provider.id`.
const PROBE_SOURCE = `
import fs from "node:fs"
import { pathToFileURL } from "node:url"
const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"))
const out = { runtime: typeof Bun === "undefined" ? "not bun" : "bun " + Bun.version, shape: null, id: null, factories: [], stage: null, error: null }
const save = () => fs.writeFileSync(cfg.out, JSON.stringify(out, null, 2))
const finish = (code) => { save(); process.exit(code) }
setTimeout(() => { if (!out.error) { out.stage = "probe"; out.error = "probe: gave up after " + cfg.totalMs + " ms" } finish(3) }, cfg.totalMs)
const isPlain = (v) => typeof v === "object" && v !== null && !Array.isArray(v)
const errText = (e) => (e instanceof Error ? e.name + ": " + e.message : String(e))
const settle = (v, what) => Promise.race([Promise.resolve(v), new Promise((_, rej) => setTimeout(() => rej(new Error("probe: " + what + " did not settle within " + cfg.factoryMs + " ms")), cfg.factoryMs))])
// own property names, plus those of user-defined prototypes (class instances); built-in prototypes are not walked
const builtinProto = (p) => { try { return /\[native code\]/.test(Function.prototype.toString.call(p.constructor)) } catch { return false } }
const names = (o) => { const s = new Set(); for (let p = o; p && (p === o || !builtinProto(p)); p = Object.getPrototypeOf(p)) for (const k of Object.getOwnPropertyNames(p)) if (k !== "constructor" || p === o) s.add(k); return [...s].sort() }
function describe(h) {
  if (h === null || typeof h !== "object") return { returned: h === null ? "null" : typeof h, keys: [] }
  if (Array.isArray(h)) return { returned: "array", keys: [] }
  const d = { keys: names(h) }
  if (h.tool && typeof h.tool === "object") d.tool_ids = Object.keys(h.tool).sort()
  if (h.auth && typeof h.auth === "object") d.auth = { provider: h.auth.provider ?? null, methods: Array.isArray(h.auth.methods) ? h.auth.methods.map((m) => ({ type: m?.type ?? null, label: m?.label ?? null })) : null }
  if (h.provider && typeof h.provider === "object") d.provider_id = h.provider.id ?? null
  return d
}
const { createOpencodeClient } = await import(pathToFileURL(cfg.sdkClient).href)
const input = {
  client: createOpencodeClient({ baseUrl: cfg.serverUrl, directory: cfg.directory }),
  project: cfg.project,
  worktree: cfg.worktree,
  directory: cfg.directory,
  experimental_workspace: { register() {} },
  get serverUrl() { return new URL(cfg.serverUrl) },
  $: typeof Bun === "undefined" ? undefined : Bun.$,
}
let mod
try { mod = await import(cfg.entry) } catch (e) { out.stage = "load"; out.error = errText(e); finish(0) }
if (!mod) { out.stage = "load"; out.error = "module is empty"; finish(0) }
const def = mod.default
if (isPlain(def) && ("id" in def || "server" in def || "tui" in def)) {
  out.shape = "v1"
  out.id = typeof def.id === "string" ? def.id.trim() : null
  const bad = def.server !== undefined && typeof def.server !== "function" ? "has invalid server export"
    : def.tui !== undefined && typeof def.tui !== "function" ? "has invalid tui export"
    : def.server !== undefined && def.tui !== undefined ? "must default export either server() or tui(), not both"
    : typeof def.server !== "function" ? "must default export an object with server()" : null
  if (bad) { out.stage = "load"; out.error = "TypeError: Plugin " + bad; finish(0) }
  try { out.factories.push({ exports: ["default"], via: "server", ...describe(await settle(def.server(input, cfg.options), "server()")) }) }
  catch (e) { out.stage = "factory"; out.error = errText(e); out.factories.push({ exports: ["default"], via: "server", error: errText(e) }) }
} else {
  out.shape = "legacy"
  const list = []
  const byValue = new Map()
  for (const [k, v] of Object.entries(mod)) {
    if (byValue.has(v)) { byValue.get(v).exports.push(k); continue }
    const e = { exports: [k], value: v }
    byValue.set(v, e)
    list.push(e)
  }
  for (const e of list) {
    const v = e.value
    e.fn = typeof v === "function" ? v : v && typeof v === "object" && "server" in v && typeof v.server === "function" ? v.server : undefined
  }
  const notFn = list.filter((e) => !e.fn)
  if (notFn.length) {
    out.stage = "load"
    out.error = "TypeError: Plugin export is not a function"
    out.not_functions = notFn.map((e) => ({ exports: e.exports, type: e.value === null ? "null" : typeof e.value }))
    finish(0)
  }
  for (const e of list) {
    const f = { exports: e.exports }
    if (e.fn !== e.value) f.via = "server"
    try { Object.assign(f, describe(await settle(e.fn(input, cfg.options), e.exports[0] + "()"))); out.factories.push(f) }
    catch (err) { f.error = errText(err); out.factories.push(f); out.stage = "factory"; out.error = errText(err); break }
  }
}
finish(0)
`

/** Run the probe in its own process group; always stop the group afterwards. */
async function runProbe(c, cfg) {
  const probeFile = path.join(c.caseDir, "berth-corpus-probe.mjs")
  const inFile = path.join(c.caseDir, "berth-corpus-probe.json")
  const outFile = path.join(c.caseDir, "berth-corpus-probe.out.json")
  fs.writeFileSync(probeFile, PROBE_SOURCE)
  fs.writeFileSync(inFile, JSON.stringify({ ...cfg, out: outFile, totalMs: PROBE_MS, factoryMs: 20000 }))
  const logFile = path.join(c.tmpRoot, "probe.log")
  const child = spawn(lib.OPENCODE, [probeFile, inFile], {
    cwd: c.directory,
    env: { ...c.env, BUN_BE_BUN: "1" },
    detached: true,
    stdio: ["ignore", fs.openSync(logFile, "w"), fs.openSync(logFile, "a")],
  })
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })))
  const timer = new Promise((resolve) => setTimeout(() => resolve({ timeout: true }), PROBE_MS + 10000))
  const how = await Promise.race([exited, timer])
  if (groupAlive(child.pid)) killGroup(child.pid)
  const log = fs.existsSync(logFile) ? stripAnsi(fs.readFileSync(logFile, "utf8")) : ""
  if (!fs.existsSync(outFile)) return { error: `probe produced no result (${JSON.stringify(how)}): ${clip(log.trim(), 800)}` }
  const res = JSON.parse(fs.readFileSync(outFile, "utf8"))
  res.log_tail = log.trim() ? clip(log.trim().split("\n").slice(-5).join("\n"), 800) : undefined
  return res
}

function waitFor(pred, ms) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (pred()) return true
    sleep(50)
  }
  return pred()
}

/** `GET /global/event` (SSE) into a file, from now on. Returns { file, stop(), events() }. */
function followEvents(base, file) {
  const child = spawn("curl", ["-s", "-N", "-m", String(INSTALL_SECONDS + 120), `${base}/global/event`], {
    detached: true,
    stdio: ["ignore", fs.openSync(file, "w"), "ignore"],
  })
  child.unref()
  waitFor(() => fs.existsSync(file) && fs.readFileSync(file, "utf8").includes("server.connected"), 10000)
  return {
    stop: () => killGroup(child.pid),
    events: () =>
      fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => {
          try {
            return JSON.parse(l.slice(6))
          } catch {
            return null
          }
        })
        .filter(Boolean),
  }
}

/** logfmt-ish: the value of key= in one --print-logs line (quoted or bare). */
function logField(line, key) {
  const m = new RegExp(`(?:^| )${key}=("(?:[^"\\\\]|\\\\.)*"|\\S+)`).exec(line)
  if (!m) return undefined
  const v = m[1]
  if (v.startsWith('"')) {
    try {
      return JSON.parse(v)
    } catch {
      return v.slice(1, -1)
    }
  }
  return v
}

/**
 * Load one package (spec "name@x.y.z") in a fresh OpenCode server and return
 * { rec, timing: { cold, server_ready_ms, instance_ms, probe_ms, total_ms } }.
 */
async function recordOne(spec, { builtinIds } = {}) {
  const T0 = lib.now()
  const { name, version } = parseSpec(spec)
  const builtin = builtinIds ?? new Set(JSON.parse(fs.readFileSync(BASELINE, "utf8")).builtin_tool_ids)
  const cold = !installDir(name, version)
  fs.mkdirSync(CACHE_ROOT, { recursive: true })

  const c = lib.prepareCase("corpus", { src: CASE_SRC })
  // A real registry (the one npm is configured with) instead of the dead one; the persistent cache.
  delete c.env.npm_config_registry
  delete c.env.npm_config_fetch_retries
  c.env.XDG_CACHE_HOME = CACHE_ROOT
  for (const k of ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "NODE_EXTRA_CA_CERTS"])
    if (process.env[k]) c.env[k] = process.env[k]
  const cfgFile = path.join(c.directory, "opencode.json")
  const baseCfg = JSON.parse(fs.readFileSync(cfgFile, "utf8"))
  fs.writeFileSync(cfgFile, JSON.stringify({ ...baseCfg, plugin: [spec] }, null, 2) + "\n")
  // The plugin-less project on the same server: built-in tool descriptions and auth methods.
  const baseDir = path.join(c.caseDir, "baseline")
  fs.mkdirSync(baseDir, { recursive: true })
  fs.writeFileSync(path.join(baseDir, "opencode.json"), JSON.stringify(baseCfg, null, 2) + "\n")
  lib.run("git", ["init", "-q", baseDir], { env: c.env })

  const notes = []
  const timing = { cold }
  let server
  let events
  const rec = {
    about:
      `What the real OpenCode ${lib.EXPECTED_VERSION} does with the npm plugin ${spec} (fixtures/corpus/corpus.json). ` +
      "loads/error: session.error bus events (GET /global/event) and --print-logs ERROR lines; tools: GET /experimental/tool " +
      "minus built-in ids (tests/oracle/discovery/_baseline.json), plus plugin tools that reuse a built-in id; hooks: no " +
      "OpenCode API lists them, so they are what the plugin's factories return when the hook probe of " +
      "scripts/oracle/lib/corpus.cjs (on OpenCode's own Bun, BUN_BE_BUN=1) imports the entry OpenCode resolved in " +
      "OpenCode's install dir and calls them as OpenCode's loader does. Re-record with scripts/oracle/record-corpus.",
    opencode_version: lib.EXPECTED_VERSION,
    command: "",
    spec,
    loads: false,
    error: null,
  }
  try {
    server = startServer(c, { healthSeconds: 90 })
    timing.server_ready_ms = server.ready_ms
    const ocVersion = curl(`${server.base}/global/health`, 10).json?.version
    if (ocVersion !== lib.EXPECTED_VERSION) throw new Error(`.tools/bin/opencode is ${ocVersion}, expected ${lib.EXPECTED_VERSION}`)
    rec.command =
      `${server.command}; GET /experimental/tool?directory=<case>/project&provider=${PROVIDER}&model=${MODEL}; ` +
      "BUN_BE_BUN=1 opencode <case>/berth-corpus-probe.mjs"
    events = followEvents(server.base, path.join(c.tmpRoot, "events.txt"))
    const q = (dir) => `directory=${encodeURIComponent(dir)}`
    const tq = (dir) => `${q(dir)}&provider=${PROVIDER}&model=${MODEL}`

    const t1 = lib.now()
    const tools = curl(`${server.base}/experimental/tool?${tq(c.directory)}`, INSTALL_SECONDS)
    timing.instance_ms = lib.now() - t1
    const ids = curl(`${server.base}/experimental/tool/ids?${q(c.directory)}`, 60)
    const auth = curl(`${server.base}/provider/auth?${q(c.directory)}`, 60)
    const config = curl(`${server.base}/config?${q(c.directory)}`, 60)
    const project = curl(`${server.base}/project/current?${q(c.directory)}`, 60)
    const bTools = curl(`${server.base}/experimental/tool?${tq(baseDir)}`, 120)
    const bAuth = curl(`${server.base}/provider/auth?${q(baseDir)}`, 60)

    // Hooks: the probe, while the server is up (the plugin's client talks to it).
    const dir = installDir(name, version)
    let entry
    if (dir) {
      const pkgDir = path.join(dir, "node_modules", name)
      entry = serverEntry(pkgDir)
      rec.entry = entry.missing ? null : { field: entry.field, path: entry.shown }
      rec.installed = installedInfo(dir)
    }
    let probe
    if (entry && !entry.missing) {
      const t2 = lib.now()
      probe = await runProbe(c, {
        entry: entry.entry,
        options: undefined,
        sdkClient: SDK_CLIENT,
        serverUrl: new URL(server.base).href,
        directory: c.directory,
        worktree: c.directory,
        project: project.json,
      })
      timing.probe_ms = lib.now() - t2
    }
    sleep(300) // let forked bus publications land
    events.stop()

    // --- loads / error
    const stderr = stripAnsi(fs.readFileSync(server.stderrFile, "utf8")).split("\n")
    const errors = events
      .events()
      .filter((e) => e.payload?.type === "session.error" && e.directory === c.directory)
      .map((e) => e.payload.properties?.error?.data?.message ?? JSON.stringify(e.payload.properties?.error))
      .filter((m) => typeof m === "string" && m.includes(name))
    const factoryFailures = stderr
      .filter((l) => /level=ERROR/.test(l) && logField(l, "message") === "failed to load plugin")
      .filter((l) => (logField(l, "path") ?? "").includes(name))
      .map((l) => `failed to load plugin: ${logField(l, "error") ?? l}`)
    const skippedByName = DEPRECATED.some((d) => spec.includes(d))
    const listed = Array.isArray(config.json?.plugin) && config.json.plugin.includes(spec)
    if (!listed) notes.push(`GET /config did not list ${spec} in "plugin": ${clip(JSON.stringify(config.json?.plugin ?? config.body), 300)}`)
    if (skippedByName) {
      rec.loads = false
      rec.skipped = `dropped by name: OpenCode ${lib.EXPECTED_VERSION} skips every spec containing ${DEPRECATED.map((d) => `"${d}"`).join(" or ")} (built in now), silently (no event, no log line)`
    } else if (errors.length || factoryFailures.length) {
      rec.loads = false
      rec.error = clip([...errors, ...factoryFailures].join("\n"))
    } else if (entry?.missing) {
      rec.loads = false
      rec.skipped = 'no server entry: package.json has an "exports" object without "./server" and no "main"; OpenCode skips it silently'
    } else if (!dir) {
      rec.loads = false
      rec.error = "not installed, and no error event was seen"
    } else {
      rec.loads = true
    }

    // --- hooks (probe) and auth
    if (probe) {
      rec.shape = probe.shape
      if (probe.id) rec.v1_id = probe.id
      rec.factories = (probe.factories ?? []).map((f) => {
        const o = { exports: f.exports }
        if (f.via) o.via = f.via
        if (f.returned) o.returned = f.returned
        if (f.error) o.error = clip(f.error, 300)
        else o.keys = f.keys
        return o
      })
      const keys = [...new Set((probe.factories ?? []).flatMap((f) => f.keys ?? []))].sort()
      rec.hooks = keys.filter((k) => HOOK_NAMES.has(k))
      const other = keys.filter((k) => !HOOK_NAMES.has(k))
      if (other.length) rec.other_keys = other
      rec.auth_providers = [...new Set((probe.factories ?? []).map((f) => f.auth?.provider).filter((p) => typeof p === "string"))].sort()
      if (probe.error) rec.probe_error = clip(`${probe.stage}: ${probe.error}`, 600)
      if (rec.loads && probe.stage === "load") notes.push("the probe could not load the module although OpenCode reported no error")
      const providerIds = (probe.factories ?? []).map((f) => f.provider_id).filter(Boolean)
      if (providerIds.length) rec.provider_hook = [...new Set(providerIds)].sort()
      if (probe.log_tail && probe.error) notes.push(`probe output: ${probe.log_tail}`)
    } else if (probe === undefined && !rec.skipped && dir) {
      notes.push("hook probe not run")
    } else if (!dir) {
      rec.hooks = []
      rec.auth_providers = []
    }
    if (!rec.hooks) {
      rec.hooks = []
      rec.auth_providers = []
    }
    // --- tools (after the probe: a plugin tool with a built-in's id is told apart by the probe's tool keys)
    const probeToolIds = new Set((probe?.factories ?? []).flatMap((f) => f.tool_ids ?? []))
    const builtinDesc = new Map()
    if (bTools.status === 200 && Array.isArray(bTools.json)) for (const t of bTools.json) builtinDesc.set(t.id, t.description)
    rec.tools = {}
    rec.overrides_builtin = []
    if (tools.status === 200 && Array.isArray(tools.json)) {
      const count = new Map()
      for (const t of tools.json) count.set(t.id, (count.get(t.id) ?? 0) + 1)
      const changedBuiltins = []
      const picked = tools.json.filter((t) => {
        if (!builtin.has(t.id)) return true
        const differs = t.description !== builtinDesc.get(t.id)
        // a plugin tool with a built-in's id: listed twice (keep the entry that is not the built-in's), or
        // listed once with the plugin's tool keys naming it
        if (count.get(t.id) > 1) return differs
        if (probeToolIds.has(t.id)) return true
        if (differs) changedBuiltins.push(t.id)
        return false
      })
      for (const t of picked) {
        if (builtin.has(t.id) && !rec.overrides_builtin.includes(t.id)) {
          rec.overrides_builtin.push(t.id)
          notes.push(
            `tool "${t.id}" has a built-in's id: GET /experimental/tool lists "${t.id}" ${count.get(t.id)}x` +
              (count.get(t.id) > 1 ? "; recorded here is the entry whose description is not the built-in's" : ""),
          )
        }
        if (rec.tools[t.id]) notes.push(`tool "${t.id}" listed more than once`)
        rec.tools[t.id] = { description: t.description, parameters: t.parameters }
      }
      for (const id of changedBuiltins)
        notes.push(`the built-in tool "${id}" has another description than in a plugin-less project (the plugin changes config, e.g. adds agents); not recorded under tools`)
      rec.tools = sortedObject(rec.tools)
      rec.overrides_builtin.sort()
      const probeTools = [...probeToolIds].sort()
      const apiTools = Object.keys(rec.tools)
      if (probe && rec.loads && JSON.stringify(probeTools) !== JSON.stringify(apiTools))
        notes.push(`the probe's tool keys [${probeTools.join(", ")}] differ from the tools OpenCode listed [${apiTools.join(", ")}]`)
    } else {
      rec.tools_error = clip(JSON.stringify({ http_status: tools.status, body: tools.json ?? tools.body }), 1200)
      if (ids.status === 200 && Array.isArray(ids.json)) rec.tool_ids_listed = ids.json.filter((id) => !builtin.has(id))
    }
    if (ids.status === 200 && Array.isArray(ids.json)) {
      const dup = ids.json.filter((id, i) => ids.json.indexOf(id) !== i)
      if (dup.length) notes.push(`GET /experimental/tool/ids lists ${[...new Set(dup)].join(", ")} more than once`)
    }

    // Auth methods as the server shows them: providers whose method list differs from the plugin-less project.
    if (auth.status === 200 && auth.json && bAuth.status === 200 && bAuth.json) {
      const changed = {}
      for (const [prov, methods] of Object.entries(auth.json)) {
        if (JSON.stringify(methods) === JSON.stringify(bAuth.json[prov])) continue
        changed[prov] = methods.map((m) => `${m.type}: ${m.label}`)
      }
      rec.provider_auth = sortedObject(changed)
      for (const p of rec.auth_providers ?? [])
        if (!changed[p] && rec.loads) notes.push(`the probe saw auth.provider "${p}", but GET /provider/auth shows no change for it`)
    }

    // --- other errors OpenCode logged (plugin code logging through the client shows up here too)
    const logged = stderr
      .filter((l) => /level=(ERROR|WARN)/.test(l))
      .map((l) => `${logField(l, "level")} ${logField(l, "message") ?? ""}${logField(l, "error") ? `: ${logField(l, "error")}` : ""}`.trim())
      .map((l) => clip(l, 300))
    if (logged.length) rec.log_errors = [...new Set(logged)]
  } finally {
    if (events) events.stop()
    if (server) server.stop()
    lib.cleanup(c)
  }
  if (notes.length) rec.notes = notes
  timing.total_ms = lib.now() - T0
  const ORDER = ["about", "opencode_version", "command", "spec", "loads", "error", "skipped", "entry", "shape", "v1_id",
    "tools", "tools_error", "tool_ids_listed", "overrides_builtin", "hooks", "other_keys", "auth_providers", "provider_auth",
    "provider_hook", "factories", "probe_error", "installed", "log_errors", "notes"]
  let out = Object.fromEntries([...ORDER.filter((k) => k in rec), ...Object.keys(rec).filter((k) => !ORDER.includes(k))].map((k) => [k, rec[k]]))
  out = lib.replaceAll(out, [[CACHE_ROOT, "<cache>"]])
  out = lib.placeholders(out, c)
  const reg = JSON.stringify(out).includes("://") ? npmRegistry() : ""
  if (reg) out = lib.replaceAll(out, [[reg, "<registry>"]])
  return { rec: out, timing }
}

module.exports = {
  CORPUS_FILE,
  OUT_DIR,
  CACHE_ROOT,
  readCorpus,
  parseSpec,
  sanitisedName,
  recordOne,
  serverEntry,
  installDir,
}
