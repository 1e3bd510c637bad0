// A static npm registry on loopback for tests: serves the fixture packages under --root (one
// folder per version) as packuments and deterministic tarballs, plus synthetic dependencies and
// a small control API to publish, hide and count. It must not reach the network, read anything
// outside --root, or use anything but node: built-ins.
//
//   node tests/support/registry.mjs --root fixtures/registry [--visible a@1.0.0,b@2.0.0 | --all-visible]
//
// Prints one line `{"port":N}` once listening on 127.0.0.1; exits when stdin closes or on SIGTERM.
//
// Control API (JSON):
//   POST /-/berth/publish        {"spec":"name@version","time":"ISO (optional)"}  makes a version visible
//   POST /-/berth/unpublish      {"spec":"name@version"}                           hides it again
//   GET  /-/berth/requests       {"<path>": count} of every non-control request served
//   GET  /-/berth/log            [{"method","path","accept"}] of the same, in order
//   POST /-/berth/reset-requests forgets both

import { createHash } from "node:crypto"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { gzipSync } from "node:zlib"

// npm's own fixed mtime for packed files (1985-10-26T08:15:00Z), so a fixture's integrity never
// depends on when it was checked out.
const MTIME = Math.floor(Date.UTC(1985, 9, 26, 8, 15, 0) / 1000)
const SYNTH = /^berth-synth-dep-\d+$/

const { values: args } = parseArgs({
  options: {
    root: { type: "string" },
    visible: { type: "string", default: "" },
    "all-visible": { type: "boolean", default: false },
  },
})
if (!args.root) fail("--root is required")
const root = resolve(args.root)

// ---- semver (x.y.z[-pre][+build]): enough to pick dist-tags.latest ----

function parseSemver(v) {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(v)
  if (!m) return null
  return { core: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] ? m[4].split(".") : [] }
}

function compareSemver(a, b) {
  const x = parseSemver(a)
  const y = parseSemver(b)
  for (let i = 0; i < 3; i++) if (x.core[i] !== y.core[i]) return x.core[i] - y.core[i]
  // A release ranks above its prereleases; otherwise identifiers compare left to right.
  if (!x.pre.length || !y.pre.length) return y.pre.length - x.pre.length
  for (let i = 0; i < Math.max(x.pre.length, y.pre.length); i++) {
    const p = x.pre[i]
    const q = y.pre[i]
    if (p === undefined) return -1
    if (q === undefined) return 1
    if (p === q) continue
    const pn = /^\d+$/.test(p)
    const qn = /^\d+$/.test(q)
    if (pn && qn) return Number(p) - Number(q)
    if (pn !== qn) return pn ? -1 : 1
    return p < q ? -1 : 1
  }
  return 0
}

// ---- tarballs: ustar, sorted, fixed mtime and modes, gzip ----

function tarHeader(path, size, type) {
  const h = Buffer.alloc(512)
  let name = path
  let prefix = ""
  if (Buffer.byteLength(name) > 100) {
    const cut = path.lastIndexOf("/", 155)
    if (cut <= 0 || Buffer.byteLength(path.slice(cut + 1)) > 100) fail(`path too long for ustar: ${path}`)
    prefix = path.slice(0, cut)
    name = path.slice(cut + 1)
  }
  const octal = (n, width) => n.toString(8).padStart(width - 1, "0") + "\0"
  h.write(name, 0, 100, "utf8")
  h.write(octal(type === "5" ? 0o755 : 0o644, 8), 100, 8, "ascii")
  h.write(octal(0, 8), 108, 8, "ascii") // uid
  h.write(octal(0, 8), 116, 8, "ascii") // gid
  h.write(octal(size, 12), 124, 12, "ascii")
  h.write(octal(MTIME, 12), 136, 12, "ascii")
  h.write("        ", 148, 8, "ascii") // checksum counts as spaces while summing
  h.write(type, 156, 1, "ascii")
  h.write("ustar\0", 257, 6, "ascii")
  h.write("00", 263, 2, "ascii")
  h.write(prefix, 345, 155, "utf8")
  let sum = 0
  for (const b of h) sum += b
  h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "ascii")
  return h
}

/** entries: [{ path: "index.js", data: Buffer }] relative to the package folder. */
function buildTarball(entries) {
  const dirs = new Set(["package"])
  for (const e of entries) {
    const parts = `package/${e.path}`.split("/")
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"))
  }
  const items = [
    ...[...dirs].map((d) => ({ path: `${d}/`, dir: true })),
    ...entries.map((e) => ({ path: `package/${e.path}`, data: e.data })),
  ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  const chunks = []
  for (const it of items) {
    if (it.dir) {
      chunks.push(tarHeader(it.path, 0, "5"))
    } else {
      chunks.push(tarHeader(it.path, it.data.length, "0"), it.data)
      const pad = (512 - (it.data.length % 512)) % 512
      if (pad) chunks.push(Buffer.alloc(pad))
    }
  }
  chunks.push(Buffer.alloc(1024)) // two zero blocks end the archive
  const gz = gzipSync(Buffer.concat(chunks), { level: 9 })
  gz[9] = 3 // the header's OS byte: fixed (Unix) so the bytes do not depend on the platform
  return gz
}

function walk(dir, rel = "") {
  const out = []
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name
    const st = statSync(join(dir, r))
    if (st.isDirectory()) out.push(...walk(dir, r))
    else if (st.isFile()) out.push({ path: r, data: readFileSync(join(dir, r)) })
  }
  return out
}

// ---- the package store ----

/** name -> Map(version -> { manifest, tarball, integrity, shasum }) */
const store = new Map()
/** "name@version" -> ISO time it became visible */
const visible = new Map()

function addVersion(name, version, entries) {
  const pj = entries.find((e) => e.path === "package.json")
  if (!pj) fail(`${name}@${version}: no package.json`)
  const manifest = JSON.parse(pj.data.toString("utf8"))
  if (manifest.name !== name || manifest.version !== version)
    fail(`${name}@${version}: its package.json says ${manifest.name}@${manifest.version}`)
  if (!parseSemver(version)) fail(`${name}@${version}: not x.y.z[-pre]`)
  const tarball = buildTarball(entries)
  const rec = {
    manifest,
    tarball,
    integrity: "sha512-" + createHash("sha512").update(tarball).digest("base64"),
    shasum: createHash("sha1").update(tarball).digest("hex"),
  }
  if (!store.has(name)) store.set(name, new Map())
  store.get(name).set(version, rec)
  return rec
}

function loadRoot() {
  const isVersion = (d) => /^\d+\.\d+\.\d+/.test(d)
  const dirsIn = (p) => readdirSync(p).filter((d) => statSync(join(p, d)).isDirectory())
  for (const top of dirsIn(root).sort()) {
    const names = top.startsWith("@") ? dirsIn(join(root, top)).map((n) => `${top}/${n}`) : [top]
    for (const name of names) {
      for (const version of dirsIn(join(root, name)).filter(isVersion).sort()) {
        addVersion(name, version, walk(join(root, name, version)))
      }
    }
  }
}

/** A synthetic dependency, made the first time someone asks for it. */
function synth(name) {
  if (!store.has(name)) {
    const pkg = { name, version: "1.0.0", description: "A synthetic dependency of the Berth test registry.", main: "index.js" }
    addVersion(name, "1.0.0", [
      { path: "index.js", data: Buffer.from(`module.exports = ${JSON.stringify(name)}\n`) },
      { path: "package.json", data: Buffer.from(JSON.stringify(pkg, null, 2) + "\n") },
    ])
    visible.set(`${name}@1.0.0`, startTime)
  }
  return store.get(name)
}

function lookup(name) {
  return SYNTH.test(name) ? synth(name) : store.get(name)
}

function splitSpec(spec) {
  const at = typeof spec === "string" ? spec.lastIndexOf("@") : -1
  if (at <= 0) return null
  return { name: spec.slice(0, at), version: spec.slice(at + 1) }
}

function visibleVersions(name) {
  const versions = lookup(name)
  if (!versions) return []
  return [...versions.keys()].filter((v) => visible.has(`${name}@${v}`)).sort(compareSemver)
}

function packument(name, origin) {
  const versions = visibleVersions(name)
  if (!versions.length) return null
  const recs = lookup(name)
  const doc = { _id: name, name, "dist-tags": {}, versions: {}, time: {} }
  const basename = name.includes("/") ? name.split("/")[1] : name
  for (const v of versions) {
    const rec = recs.get(v)
    doc.versions[v] = {
      ...rec.manifest,
      _id: `${name}@${v}`,
      dist: {
        tarball: `${origin}/${name}/-/${basename}-${v}.tgz`,
        integrity: rec.integrity,
        shasum: rec.shasum,
      },
    }
    doc.time[v] = visible.get(`${name}@${v}`)
  }
  const releases = versions.filter((v) => !parseSemver(v).pre.length)
  doc["dist-tags"].latest = (releases.length ? releases : versions).at(-1)
  const times = versions.map((v) => doc.time[v]).sort()
  doc.time = { created: times[0], modified: times.at(-1), ...doc.time }
  return doc
}

// ---- HTTP ----

const counts = {}
const log = []
let startTime = new Date().toISOString()

function send(res, status, body, type = "application/json") {
  const data = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body))
  res.writeHead(status, {
    "Content-Type": type,
    "Content-Length": data.length,
    "Cache-Control": "no-cache, max-age=0",
  })
  res.end(res.req.method === "HEAD" ? undefined : data)
}

const notFound = (res) => send(res, 404, { error: "not found" })

function readJson(req) {
  return new Promise((ok, bad) => {
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      try {
        ok(chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {})
      } catch (e) {
        bad(e)
      }
    })
    req.on("error", bad)
  })
}

async function control(req, res, action) {
  if (req.method === "GET" && action === "requests") return send(res, 200, counts)
  if (req.method === "GET" && action === "log") return send(res, 200, log)
  if (req.method !== "POST") return notFound(res)
  if (action === "reset-requests") {
    for (const k of Object.keys(counts)) delete counts[k]
    log.length = 0
    return send(res, 200, { ok: true })
  }
  let body
  try {
    body = await readJson(req)
  } catch {
    return send(res, 400, { error: "body is not JSON" })
  }
  const spec = splitSpec(body.spec)
  if (action !== "publish" && action !== "unpublish") return notFound(res)
  if (!spec || !store.get(spec.name)?.has(spec.version)) return send(res, 404, { error: `no fixture ${body.spec}` })
  if (SYNTH.test(spec.name)) return send(res, 400, { error: "synthetic dependencies are always visible" })
  const key = `${spec.name}@${spec.version}`
  if (action === "unpublish") {
    visible.delete(key)
    return send(res, 200, { ok: true, spec: key })
  }
  const when = body.time === undefined ? new Date() : new Date(body.time)
  if (Number.isNaN(when.getTime())) return send(res, 400, { error: "time is not a date" })
  visible.set(key, when.toISOString())
  return send(res, 200, { ok: true, spec: key, time: visible.get(key) })
}

async function handle(req, res) {
  const rawPath = req.url.split("?")[0]
  if (rawPath.startsWith("/-/berth/")) return control(req, res, rawPath.slice("/-/berth/".length))
  counts[rawPath] = (counts[rawPath] ?? 0) + 1
  log.push({ method: req.method, path: rawPath, accept: req.headers.accept ?? null })
  if (req.method !== "GET" && req.method !== "HEAD") return notFound(res)
  let path
  try {
    path = decodeURIComponent(rawPath).slice(1)
  } catch {
    return notFound(res)
  }
  const origin = `http://127.0.0.1:${server.address().port}`
  const dash = path.indexOf("/-/")
  if (dash < 0) {
    const doc = packument(path, origin)
    return doc ? send(res, 200, doc) : notFound(res)
  }
  // <name>/-/<basename>-<version>.tgz, served only for a visible version.
  const name = path.slice(0, dash)
  const file = path.slice(dash + 3)
  const basename = name.includes("/") ? name.split("/")[1] : name
  if (!file.startsWith(`${basename}-`) || !file.endsWith(".tgz")) return notFound(res)
  const version = file.slice(basename.length + 1, -".tgz".length)
  const rec = lookup(name)?.get(version)
  if (!rec || !visible.has(`${name}@${version}`)) return notFound(res)
  return send(res, 200, rec.tarball, "application/octet-stream")
}

function fail(message) {
  process.stderr.write(`registry: ${message}\n`)
  process.exit(2)
}

loadRoot()
startTime = new Date().toISOString()
const wanted = args["all-visible"]
  ? [...store].flatMap(([name, versions]) => [...versions.keys()].map((v) => `${name}@${v}`))
  : args.visible.split(",").filter(Boolean)
for (const spec of wanted) {
  const s = splitSpec(spec.trim())
  if (!s || !store.get(s.name)?.has(s.version)) fail(`--visible names no fixture: ${spec}`)
  visible.set(`${s.name}@${s.version}`, startTime)
}

const server = createServer((req, res) => {
  handle(req, res).catch((e) => {
    process.stderr.write(`registry: ${e.stack}\n`)
    if (!res.headersSent) send(res, 500, { error: String(e.message) })
  })
})
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n")
})

// Owned by whoever started us: when they go (stdin closes) or ask (SIGTERM), so do we.
process.stdin.on("end", () => process.exit(0))
process.stdin.on("close", () => process.exit(0))
process.stdin.resume()
process.on("SIGTERM", () => process.exit(0))
