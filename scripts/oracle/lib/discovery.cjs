// Shared code for scripts/oracle/record-discovery and scripts/oracle/live-discovery.
//
// Runs the real OpenCode binary (.tools/bin/opencode, installed by scripts/install-tools) on one
// fixture config graph from fixtures/discovery/<case>/ in an isolated temp copy and returns a
// machine-independent JSON description of what it discovered. See fixtures/discovery/README.md.
"use strict"

const fs = require("node:fs")
const os = require("node:os")
const path = require("node:path")
const net = require("node:net")
const { spawn, spawnSync } = require("node:child_process")
const { sleep, freePort, curl, killGroup, readJsonLines } = require("./proc.cjs")

const ROOT = path.resolve(__dirname, "..", "..", "..")
const FIXTURES = path.join(ROOT, "fixtures", "discovery")
const RECORDINGS = path.join(ROOT, "tests", "oracle", "discovery")
const OPENCODE = path.join(ROOT, ".tools", "bin", "opencode")
const OPENCODE_PKG = path.join(ROOT, ".tools", "opencode", "node_modules", "opencode-linux-x64", "package.json")
const HOST_DEPS = path.join(ROOT, ".tools", "host-deps", "node_modules")
const EXPECTED_VERSION = "1.18.4"
const PLUGIN_VERSION = "1.18.4"

// Env vars of a case's env.json whose values are paths relative to the case dir.
const PATH_ENV = new Set([
  "OPENCODE_CONFIG",
  "OPENCODE_CONFIG_DIR",
  "OPENCODE_TUI_CONFIG",
  "OPENCODE_TEST_HOME",
  "OPENCODE_TEST_MANAGED_CONFIG_DIR",
])

// A registry that refuses connections: npm plugin installs fail at once instead of downloading.
const DEAD_REGISTRY = "http://127.0.0.1:9/"

const now = () => Number(process.hrtime.bigint() / 1000000n)

function die(msg) {
  process.stderr.write(`error: ${msg}\n`)
  process.exit(2)
}

function requireTools() {
  if (!fs.existsSync(OPENCODE)) die(`${path.relative(ROOT, OPENCODE)} missing: run scripts/install-tools`)
  if (!fs.existsSync(HOST_DEPS)) die(`${path.relative(ROOT, HOST_DEPS)} missing: run scripts/install-tools`)
}

function installedVersion() {
  try {
    return JSON.parse(fs.readFileSync(OPENCODE_PKG, "utf8")).version
  } catch {
    return undefined
  }
}

function listCases() {
  return fs
    .readdirSync(FIXTURES, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
}

function readJsonIfExists(file, fallback) {
  if (!fs.existsSync(file)) return fallback
  return JSON.parse(fs.readFileSync(file, "utf8"))
}

// Copy in sorted name order (mkdir first, then files) so the copy is made the same way every time.
function copyTree(src, dst) {
  fs.mkdirSync(dst, { recursive: true })
  const entries = fs.readdirSync(src, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))
  for (const e of entries) {
    const s = path.join(src, e.name)
    const d = path.join(dst, e.name)
    if (e.isDirectory()) copyTree(s, d)
    else if (e.isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(s), d)
    else fs.copyFileSync(s, d)
  }
}

// Walk a tree (no node_modules, no .git), calling fn(dir) for each directory.
function walkDirs(dir, fn) {
  fn(dir)
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (!e.isDirectory() || e.name === "node_modules" || e.name === ".git") continue
    walkDirs(path.join(dir, e.name), fn)
  }
}

// Raw readdir order (no sorting), as the OS returns it.
function readdirRaw(dir) {
  const out = []
  const d = fs.opendirSync(dir)
  try {
    let e
    while ((e = d.readSync()) !== null) out.push(e.name)
  } finally {
    d.closeSync()
  }
  return out
}

// Make a config dir look as if OpenCode had already installed its dependencies into it
// (package.json + package-lock.json naming @opencode-ai/plugin, node_modules present). OpenCode then
// skips its background `npm install` there, which would need the network and take seconds; custom
// tool files still resolve `@opencode-ai/plugin` (the pinned host-deps set, same versions).
function preseedConfigDir(dir) {
  fs.mkdirSync(dir, { recursive: true })
  const deps = { "@opencode-ai/plugin": PLUGIN_VERSION }
  const pkg = path.join(dir, "package.json")
  if (!fs.existsSync(pkg)) fs.writeFileSync(pkg, JSON.stringify({ dependencies: deps }, null, 2) + "\n")
  const lock = path.join(dir, "package-lock.json")
  if (!fs.existsSync(lock))
    fs.writeFileSync(
      lock,
      JSON.stringify({ lockfileVersion: 3, requires: true, packages: { "": { dependencies: deps } } }, null, 2) + "\n",
    )
  const nm = path.join(dir, "node_modules")
  if (!fs.existsSync(nm)) fs.symlinkSync(HOST_DEPS, nm)
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: "utf8", ...opts })
  if (r.error) throw r.error
  return r
}

/**
 * Copy fixtures/discovery/<name> (or opts.src) to a fresh temp dir and prepare it.
 * Returns { name, tmpRoot, caseDir, directory, git, caseEnv, env }.
 */
function prepareCase(name, opts = {}) {
  const src = opts.src ?? path.join(FIXTURES, name)
  if (!fs.existsSync(src)) die(`no such case: ${name} (cases: ${listCases().join(", ")})`)
  const tmpRoot = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "berth-oracle-")))
  const caseDir = path.join(tmpRoot, name)
  copyTree(src, caseDir)

  const meta = readJsonIfExists(path.join(caseDir, "case.json"), {})
  const caseEnv = readJsonIfExists(path.join(caseDir, "env.json"), {})
  const directory = path.join(caseDir, meta.directory ?? "project")
  const git = meta.git ?? true
  const home = path.join(caseDir, "home")
  for (const d of [directory, home, path.join(home, ".config"), path.join(home, ".local", "share"), path.join(home, ".cache"), path.join(home, ".local", "state")])
    fs.mkdirSync(d, { recursive: true })

  const env = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, ".config"),
    XDG_DATA_HOME: path.join(home, ".local", "share"),
    XDG_CACHE_HOME: path.join(home, ".cache"),
    XDG_STATE_HOME: path.join(home, ".local", "state"),
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    // Never read the machine's /etc/opencode; cases may point this at a fixture dir instead.
    OPENCODE_TEST_MANAGED_CONFIG_DIR: path.join(caseDir, ".no-managed-config"),
    npm_config_registry: DEAD_REGISTRY,
    npm_config_fetch_retries: "0",
    npm_config_update_notifier: "false",
    GIT_CONFIG_NOSYSTEM: "1",
  }
  for (const [k, v] of Object.entries(caseEnv)) env[k] = PATH_ENV.has(k) ? path.resolve(caseDir, v) : String(v)

  if (git) {
    const projectRoot = path.join(caseDir, meta.git_root ?? "project")
    run("git", ["init", "-q", projectRoot], { env })
  }

  if (opts.preseed !== false) {
    const dirs = new Set([path.join(home, ".config", "opencode")])
    walkDirs(caseDir, (d) => {
      if (path.basename(d) === ".opencode") dirs.add(d)
    })
    if (env.OPENCODE_CONFIG_DIR) dirs.add(env.OPENCODE_CONFIG_DIR)
    for (const d of dirs) preseedConfigDir(d)
  }
  return { name, tmpRoot, caseDir, directory, git, caseEnv, env }
}

function cleanup(c) {
  fs.rmSync(c.tmpRoot, { recursive: true, force: true })
}

// Replace machine-specific absolute paths with placeholders, everywhere in a JSON value.
function placeholders(value, c) {
  return replaceAll(value, [
    [c.caseDir, "<case>"],
    [c.tmpRoot, "<tmp>"],
    [ROOT, "<repo>"],
  ])
}

// Every `from` → `to` of `pairs` in every string (keys too) of a JSON value.
function replaceAll(value, pairs) {
  const fix = (s) => {
    for (const [from, to] of pairs) s = s.split(from).join(to)
    return s
  }
  const walk = (v) => {
    if (typeof v === "string") return fix(v)
    if (Array.isArray(v)) return v.map(walk)
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [fix(k), walk(x)]))
    return v
  }
  return walk(value)
}

const stripAnsi = (s) => s.replace(/\x1b\[[0-9;]*m/g, "")


function specOf(entry) {
  return Array.isArray(entry) ? entry[0] : entry
}

// For each plugin/plugins (and tool/tools) folder in the copy: the raw readdir order of its
// *.ts/*.js files and the order in which OpenCode listed them.
function folderOrders(c, pluginList, toolIds) {
  const plugin = []
  const tool = []
  walkDirs(c.caseDir, (d) => {
    const base = path.basename(d)
    if (!["plugin", "plugins", "tool", "tools"].includes(base)) return
    const files = readdirRaw(d).filter((f) => /\.(ts|js)$/.test(f) && fs.statSync(path.join(d, f)).isFile())
    if (!files.length) return
    if (base.startsWith("plugin")) {
      const listed = (pluginList ?? [])
        .map(specOf)
        .filter((s) => typeof s === "string" && s.startsWith("file://"))
        .map((s) => decodeURIComponent(new URL(s).pathname))
        .filter((p) => path.dirname(p) === d)
        .map((p) => path.basename(p))
      const readdirListed = files.filter((f) => listed.includes(f))
      plugin.push({
        dir: d,
        readdir: files,
        in_plugin_list: listed,
        reverse_of_readdir: JSON.stringify(listed) === JSON.stringify([...readdirListed].reverse()),
      })
    } else if (toolIds) {
      const stems = files.map((f) => f.replace(/\.(ts|js)$/, ""))
      const order = []
      for (const id of toolIds) {
        const stem = stems.find((s) => id === s || id.startsWith(s + "_"))
        if (stem && !order.includes(stem)) order.push(stem)
      }
      tool.push({ dir: d, readdir: files, file_order_in_tool_ids: order })
    }
  })
  return { plugin, tool }
}

function describeEnv(c) {
  return Object.fromEntries(Object.entries(c.env).filter(([k]) => k !== "PATH"))
}

/** `opencode debug config` in the instance directory. */
function debugConfig(c) {
  const log = path.join(c.caseDir, ".oracle-load-debug-config.jsonl")
  const t0 = now()
  const r = run(OPENCODE, ["debug", "config"], {
    cwd: c.directory,
    env: { ...c.env, BERTH_ORACLE_LOG: log },
    timeout: 120000,
    maxBuffer: 64 * 1024 * 1024,
  })
  const ms = now() - t0
  const out = { exit_code: r.status, signal: r.signal ?? undefined, ms }
  if (r.status === 0) {
    const cfg = JSON.parse(r.stdout)
    out.plugin = cfg.plugin ?? []
    out.plugin_origins = cfg.plugin_origins ?? []
  } else {
    out.error = stripAnsi(r.stderr).trim()
  }
  out.loaded = readJsonLines(log)
  return out
}





/**
 * `opencode serve` in the instance directory; asks for the tool ids, paths and config of the
 * instance directory, then stops the server (its whole process group).
 */
function serve(c, opts = {}) {
  const log = path.join(c.caseDir, ".oracle-load-serve.jsonl")
  const port = freePort()
  const stdoutFile = path.join(c.tmpRoot, `serve-${c.name}.out`)
  const stderrFile = path.join(c.tmpRoot, `serve-${c.name}.err`)
  const args = ["serve", "--port", String(port), "--hostname", "127.0.0.1", "--print-logs"]
  const t0 = now()
  const child = spawn(OPENCODE, args, {
    cwd: c.directory,
    env: { ...c.env, BERTH_ORACLE_LOG: log },
    detached: true, // own process group, so the whole server tree can be stopped
    stdio: ["ignore", fs.openSync(stdoutFile, "w"), fs.openSync(stderrFile, "w")],
  })
  const base = `http://127.0.0.1:${port}`
  const q = `directory=${encodeURIComponent(c.directory)}`
  const result = { command: `opencode ${args.join(" ").replace(String(port), "<port>")}` }
  try {
    let healthy = false
    for (let i = 0; i < 240 && !healthy; i++) {
      // up to ~60 s
      const h = curl(`${base}/global/health`, 2)
      healthy = h.status === 200 && h.json?.healthy === true
      if (!healthy) sleep(250)
    }
    if (!healthy) throw new Error(`server did not become healthy; stderr: ${fs.readFileSync(stderrFile, "utf8").slice(-2000)}`)
    result.ready_ms = now() - t0
    const ids = curl(`${base}/experimental/tool/ids?${q}`, opts.idsTimeout ?? 120)
    if (ids.status === 200 && Array.isArray(ids.json)) result.tool_ids = ids.json
    else result.tool_ids_error = { http_status: ids.status, body: ids.json ?? ids.body }
    const p = curl(`${base}/path?${q}`, 30)
    if (p.status === 200 && p.json) result.path = { directory: p.json.directory, worktree: p.json.worktree, home: p.json.home, config: p.json.config }
    const cfg = curl(`${base}/config?${q}`, 30)
    if (cfg.status === 200 && cfg.json) result.config_plugin = cfg.json.plugin ?? []
    result.ms = now() - t0
  } finally {
    killGroup(child.pid)
  }
  result.loaded = readJsonLines(log)
  const loadErrors = fs
    .readFileSync(stderrFile, "utf8")
    .split("\n")
    .filter((l) => /level=(ERROR|WARN)/.test(l) && /plugin|install|tool/i.test(l))
    .map((l) => stripAnsi(l).replace(/^timestamp=\S+ /, "").replace(/ run=\S+/, ""))
  if (loadErrors.length) result.load_errors = loadErrors
  return result
}

/** The common (live) part of a recording. */
function discover(c) {
  const dc = debugConfig(c)
  const rec = {
    case: c.name,
    opencode_version: installedVersion(),
    command: "opencode debug config",
    cwd: c.directory,
    env: describeEnv(c),
    case_env: c.caseEnv,
    exit_code: dc.exit_code,
  }
  if (dc.exit_code === 0) {
    rec.plugin = dc.plugin
    rec.plugin_origins = dc.plugin_origins
  } else {
    rec.error = dc.error
  }
  rec.loaded = dc.loaded
  rec.folders = folderOrders(c, dc.plugin).plugin
  const caveats = []
  const parents = rec.folders.map((f) => path.dirname(f.dir))
  for (const p of new Set(parents.filter((p, i) => parents.indexOf(p) !== i)))
    caveats.push(
      `${p}: the order between its plugin/ and plugins/ files varies from run to run in OpenCode 1.18.4 ` +
        `(async glob over "{plugin,plugins}/*.{ts,js}"); within one folder the order is stable. Compare per folder.`,
    )
  if (caveats.length) rec.caveats = caveats
  return { rec, ms: dc.ms }
}

module.exports = {
  ROOT,
  replaceAll,
  FIXTURES,
  RECORDINGS,
  OPENCODE,
  EXPECTED_VERSION,
  requireTools,
  installedVersion,
  listCases,
  prepareCase,
  cleanup,
  placeholders,
  discover,
  serve,
  folderOrders,
  run,
  now,
}
