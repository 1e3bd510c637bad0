// Berth's plugin host: runs approved plugin and tool modules on Bun or Node, unchanged on
// both, and answers the supervisor over a private Unix socket (length-prefixed JSON frames;
// see crates/protocol). The plugin's own stdout/stderr are not the channel.
//
// Owns: importing modules the supervisor names, calling them, shaping results.
// Must not: decide what may run (the supervisor's gate already did), read Berth's store, or
// let a plugin's failure take down other calls.
// First: the built-ins the host relies on, captured before any plugin code exists.
import { frameJson, parse, ErrorCtor, PromiseCtor, promiseThen, objectEntries, objectKeys, isArray, arrayPush, arraySort, SafeMap, SafeSet, SafeWeakMap, bufferAlloc, bufferAllocUnsafe, bufferByteLength, bufferConcat, bufWrite, bufSubarray, bufToString, bufLength, stringSlice, originOf, URLCtor, lockLanguageHooks } from "./intrinsics.mjs"
import net from "node:net"
import { readFileSync, readlinkSync } from "node:fs"
import { dirname, resolve as resolvePath } from "node:path"
import { pathToFileURL, fileURLToPath } from "node:url"
import { Gate, isRefusal, refusalMessage, installDlopenGate } from "./gate.mjs"
import { truncateResult } from "./truncate.mjs"
import { isV2Definition, setupV2 } from "./v2.mjs"
import { providedFiles } from "./provided.mjs"
import { createHash } from "node:crypto"

lockLanguageHooks()

const PROTOCOL_VERSION = 2
const MAX_FRAME = 8 * 1024 * 1024
const MAX_OUTPUT = 1024 * 1024

// The handshake facts come on stdin, read to its end before any plugin code exists: never from
// the environment (`/proc/<pid>/environ` keeps what a process started with, whatever it deletes).
const env = process.env
const handshake = parse(readFileSync(0, "utf8"))
const socketPath = handshake.socket
const welcomeSecret = handshake.welcome
const secret = handshake.secret
const generation = Number(handshake.generation)
const depsDir = handshake.hostDeps
/** Each plugin's own loopback `serverUrl` (origin → the token that opens it), from its load request. */
const serverTokens = new SafeMap()
/** The same origins → the plugin instance they belong to (for requests carried on the channel). */
const serverInstances = new SafeMap()
/** Inside an OS boundary (restricted mode) the loopback service is out of reach: requests to a
 * plugin's `serverUrl` made with `fetch` travel on the channel instead, to the same routes. */
const restricted = handshake.restricted === true
/** A restricted host's boundary: the folders it may reach and whether any network is there. */
const boundaryRoots = restricted ? (handshake.boundary?.roots ?? []) : []
const boundaryNetwork = restricted && handshake.boundary?.network === true
installServerToken()

const isBun = typeof globalThis.Bun !== "undefined"
const runtime = isBun ? "bun" : "node"
const runtimeVersion = isBun ? Bun.version : process.versions.node

// What may load: only the approved bytes of the sources the supervisor cleared (their
// manifests arrive with each load request), outside Berth's own folders (`trusted`: its
// prepared installs and this code, in its private data dir).
const gate = new Gate(handshake.trusted ?? [])
// The modules Berth provides plugins (`@opencode/plugin`, D-044) pass the gate as Berth's own
// files with the bytes found now (Node's loader thread admits the same manifest at start).
const provided = { files: {} }
for (const f of providedFiles()) provided.files[f] = "sha256:" + createHash("sha256").update(readFileSync(f)).digest("hex")
gate.admit(provided)
const admitInLoaderThread = await installLoader()
// The same zod module instance the plugins get through `@opencode-ai/plugin` (ESM, resolved
// from Berth's host dependencies), so `.describe()` metadata lives in one registry.
const { z } = await import(isBun ? Bun.resolveSync("zod", depsDir) : "zod")

/**
 * Installs the load gate for the runtime. Returns how a manifest reaches Node's loader thread
 * (acknowledged before anything of the source is imported); on Bun the loader reads `gate`.
 */
async function installLoader() {
  installDlopenGate(gate)
  if (isBun) {
    const { installBunLoader } = await import("./bun-loader.mjs")
    installBunLoader(gate)
    return async () => {}
  }
  const { installCjsGate } = await import("./node-cjs-gate.mjs")
  installCjsGate(gate)
  const { register } = await import("node:module")
  const { port1, port2 } = new MessageChannel()
  const acks = new SafeMap()
  let next = 1
  port1.on("message", ({ ack, error }) => {
    const waiter = acks.get(ack)
    acks.delete(ack)
    if (error) waiter?.reject(fail("action-required", error))
    else waiter?.resolve()
  })
  port1.unref()
  // This file's own bare imports (zod) resolve in Berth's host dependencies (on the loader
  // thread, which resolves them).
  const self = fileURLToPath(import.meta.url)
  register(new URL("./node-loader.mjs", import.meta.url).href, { data: { depsDir, trusted: gate.trusted, provided, port: port2, self }, transferList: [port2] })
  return (manifest) =>
    new PromiseCtor((resolve, reject) => {
      const id = next++
      acks.set(id, { resolve, reject })
      port1.postMessage({ id, manifest })
    })
}

/** Admits a source's manifest before anything of it is imported (both threads on Node). */
async function admit(manifest) {
  if (!manifest) throw fail("action-required", "the load request carries no manifest of approved files")
  gate.admit(manifest)
  await admitInLoaderThread(manifest)
}

/** An import that the gate refused fails as `action-required`, naming the file. */
async function importApproved(url) {
  try {
    return await import(url)
  } catch (e) {
    if (isRefusal(e)) throw fail("action-required", refusalMessage(e))
    throw e
  }
}

/**
 * Requests this process makes to a plugin's `serverUrl` carry that service's token (plugins
 * fetch it with plain `fetch`, as they do against OpenCode); requests anywhere else are untouched.
 */
function installServerToken() {
  const original = globalThis.fetch
  if (typeof original !== "function") return
  globalThis.fetch = function fetch(input, init) {
    try {
      const origin = originOf(typeof input === "string" || input instanceof URLCtor ? String(input) : input.url)
      if (restricted && serverInstances.has(origin)) return fetchOnChannel(serverInstances.get(origin), input, init)
      const token = serverTokens.get(origin)
      if (token !== undefined) {
        const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined))
        headers.set("x-berth-token", token)
        return original.call(this, input, { ...init, headers })
      }
    } catch {}
    return original.call(this, input, init)
  }
}

/**
 * One `serverUrl` request carried on the channel (restricted hosts): the same routes and
 * answers as the loopback service, as a `Response`.
 */
async function fetchOnChannel(instance, input, init) {
  const request = input instanceof Request ? input : new Request(String(input), init)
  const url = new URLCtor(request.url)
  const method = init?.method ?? request.method ?? "GET"
  const body = method === "GET" || method === "HEAD" ? "" : await request.text()
  const answer = await upcall(instance, "serverUrl.request", { method, path: url.pathname, query: url.search.slice(1), body })
  return new Response(answer.body === undefined ? "null" : JSON.stringify(answer.body), {
    status: answer.status ?? 500,
    headers: { "content-type": "application/json", "x-opencode-version": answer.opencodeVersion ?? "" },
  })
}

// ---- framing -------------------------------------------------------------------------------
const sock = net.createConnection(socketPath)
sock.setNoDelay?.(true)
// The channel's own methods, pinned on the socket itself: a plugin patching `emit`, `push` or
// `write` on a prototype (EventEmitter, Readable, Writable, Socket) reaches its own sockets,
// not this one.
for (const name of ["emit", "push", "write", "_write", "_writev", "_writeGeneric", "end", "destroy"]) {
  const f = sock[name]
  if (typeof f === "function") Object.defineProperty(sock, name, { value: f, writable: false, configurable: false })
}
const sockWrite = sock.write.bind(sock)
let buffered = bufferAlloc(0)

function send(msg) {
  const json = frameJson(msg)
  const length = bufferByteLength(json)
  if (length > MAX_FRAME) {
    if (msg.t === "res") return send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: false, value: null, error: { code: "invalid-response", message: `the result is ${length} bytes, over the ${MAX_FRAME}-byte frame limit` } })
    return
  }
  // One buffer per frame: the length prefix and the body written in place.
  const frame = bufferAllocUnsafe(4 + length)
  // Index writes: a typed array's elements are not reachable through any prototype.
  frame[0] = length >>> 24
  frame[1] = (length >>> 16) & 0xff
  frame[2] = (length >>> 8) & 0xff
  frame[3] = length & 0xff
  bufWrite(frame, json, 4)
  sockWrite(frame)
}

// The supervisor speaks first and must know the welcome secret; until it has, nothing it sends
// is obeyed and nothing of ours is sent (a socket someone else put there learns nothing).
let welcomed = false
sock.on("data", (chunk) => {
  buffered = bufLength(buffered) ? bufferConcat([buffered, chunk]) : chunk
  for (;;) {
    const have = bufLength(buffered)
    if (have < 4) return
    const len = ((buffered[0] << 24) | (buffered[1] << 16) | (buffered[2] << 8) | buffered[3]) >>> 0
    if (len > MAX_FRAME) return die("oversized frame from the supervisor")
    if (have < 4 + len) return
    const body = bufSubarray(buffered, 4, 4 + len)
    buffered = bufSubarray(buffered, 4 + len)
    let msg
    try {
      msg = parse(bufToString(body, "utf8"))
    } catch {
      return die("malformed frame from the supervisor")
    }
    if (!welcomed) {
      if (msg?.t !== "welcome" || msg.v !== PROTOCOL_VERSION || msg.secret !== welcomeSecret) return die("the peer on the host socket is not the supervisor that started this host")
      welcomed = true
      send({ t: "hello", v: PROTOCOL_VERSION, secret, generation, pid: process.pid, runtime, runtime_version: runtimeVersion })
      continue
    }
    onMessage(msg)
  }
})
// The supervisor going away ends the host: nothing may outlive it.
sock.on("close", () => process.exit(0))
sock.on("error", (e) => {
  process.stderr.write(`berth-host: channel error: ${e?.message ?? e}\n`)
  process.exit(0)
})

function die(why) {
  process.stderr.write(`berth-host: ${why}\n`)
  process.exit(70)
}

// Its stdout and stderr are pipes to the supervisor: once they break, the supervisor is gone
// and so is the host (a report of the broken pipe would only break it again, without end).
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => process.exit(0))
// A plugin's stray rejection or exception must not end the host.
process.on("unhandledRejection", (e) => process.stderr.write(`berth-host: unhandled rejection: ${e?.stack ?? e}\n`))
process.on("uncaughtException", (e) => {
  if (e?.code === "EPIPE") process.exit(0)
  process.stderr.write(`berth-host: uncaught exception: ${e?.stack ?? e}\n`)
})

// ---- requests ------------------------------------------------------------------------------
// The host's registries: module-private, on captured built-ins (no plugin can read or wrap them).
const cancels = new SafeMap() // cancel_id -> AbortController
const toolDefs = new SafeMap() // `${instance}\u0000${name}` -> tool definition (tool files and plugin `tool` hooks)

const ups = new SafeMap() // up id -> {resolve, reject}
let nextUp = 1

/** A call from plugin code into Berth; answered by one `down` frame. */
function upcall(instance, method, body) {
  const up = nextUp++
  return new PromiseCtor((resolve, reject) => {
    ups.set(up, { resolve, reject })
    send({ t: "up", v: PROTOCOL_VERSION, up, instance, method, body: body ?? null })
  })
}

function onMessage(msg) {
  if (msg.t === "down") {
    const waiter = ups.get(msg.up)
    if (!waiter) return
    ups.delete(msg.up)
    if (msg.ok) waiter.resolve(msg.value)
    else waiter.reject(fail(msg.error?.code ?? "plugin-failed", msg.error?.message ?? "Berth refused the call"))
    return
  }
  if (msg.t === "cancel") {
    cancels.get(msg.cancel_id)?.abort(new ErrorCtor("cancelled"))
    return
  }
  if (msg.t !== "req") return
  send({ t: "ack", v: PROTOCOL_VERSION, id: msg.id })
  promiseThen(
    handle(msg),
    (value) => send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: true, value, error: null }),
    (err) => send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: false, value: null, error: toWireError(err) }),
  )
}

function toWireError(err) {
  // A module the gate refused (at load, or imported later by running code) names its file.
  if (isRefusal(err)) return { code: "action-required", message: stringSlice(refusalMessage(err), 0, 4000) }
  const stopped = stoppedByBoundary(err)
  const code = typeof err?.berthCode === "string" ? err.berthCode : stopped ? "policy-limited" : "plugin-failed"
  const message = stringSlice((stopped ? "the OS boundary of restricted mode stopped it: " : "") + String(err?.message ?? err), 0, 4000)
  return { code, message }
}

/**
 * Whether `err` is the OS boundary of restricted mode saying no: a refused file or system call,
 * no network when there is none, or a path outside the boundary (it does not exist inside).
 */
function stoppedByBoundary(err) {
  if (!restricted) return false
  const code = err?.code ?? err?.cause?.code
  if (code === "EACCES" || code === "EPERM" || code === "EROFS") return true
  if (!boundaryNetwork && ["ENETUNREACH", "EHOSTUNREACH", "EAI_AGAIN", "ECONNREFUSED", "ConnectionRefused", "FailedToOpenSocket"].includes(code)) return true
  const path = err?.path ?? err?.dest ?? err?.address
  return code === "ENOENT" && typeof path === "string" && leadsOutside(path)
}

/** Whether `path` is outside the boundary's folders, or a symlink (chain) that leads there. */
function leadsOutside(path) {
  const inside = (p) => boundaryRoots.some((root) => p === root || p.startsWith(root.endsWith("/") ? root : root + "/"))
  let at = path
  for (let hops = 0; hops < 8; hops++) {
    if (!inside(at)) return true
    let target
    try {
      target = readlinkSync(at)
    } catch {
      return false
    }
    at = resolvePath(dirname(at), target)
  }
  return false
}

function fail(code, message) {
  const e = new ErrorCtor(message)
  e.berthCode = code
  return e
}

async function handle(msg) {
  switch (msg.kind) {
    case "load-tools":
      return loadTools(msg.instance, msg.body)
    case "invoke":
      return invoke(msg)
    case "load-plugin":
      return loadPlugin(msg.instance, msg.body)
    case "hook-chain":
      return hookChain(msg.body)
    case "auth-authorize":
      return authAuthorize(msg.instance, msg.body)
    case "auth-callback":
      return authCallback(msg.body)
    default:
      throw fail("unsupported", `unknown call kind ${msg.kind}`)
  }
}

function isToolDefinition(v) {
  return v !== null && typeof v === "object" && "args" in v && "description" in v && "execute" in v
}

/** Imports a standalone tool file and describes its tools exactly as OpenCode 1.18.4 names them. */
async function loadTools(instance, { path, stem, version, manifest }) {
  await admit(manifest)
  const url = pathToFileURL(path).href + (version ? `?v=${version}` : "")
  const mod = await importApproved(url)
  const out = []
  const exported = objectEntries(mod)
  for (let i = 0; i < exported.length; i++) {
    const [exportName, value] = exported[i]
    if (!isToolDefinition(value)) continue
    const name = exportName === "default" ? stem : `${stem}_${exportName}`
    const parameters = toJsonSchema(value.args)
    toolDefs.set(`${instance}\u0000${name}`, value)
    arrayPush(out, { name, description: String(value.description ?? ""), parameters })
  }
  return { tools: out }
}

const isZod = (v) => v !== null && typeof v === "object" && "_zod" in v

/** OpenCode's conversion: zod 4 shapes through z.toJSONSchema(io: input); plain objects as raw schema, every key required. */
function toJsonSchema(args) {
  const values = Object.values(args ?? {})
  if (values.length > 0 && values.every(isZod)) {
    const schema = z.toJSONSchema(z.object(args), { io: "input", metadata: metadataOf(values) })
    return normalizeSchema(schema)
  }
  if (values.length === 0) return normalizeSchema(z.toJSONSchema(z.object({}), { io: "input" }))
  const properties = {}
  for (const [k, v] of Object.entries(args)) {
    if (typeof v === "boolean" || (v !== null && typeof v === "object" && !Array.isArray(v))) properties[k] = v
  }
  return { type: "object", properties, required: Object.keys(args) }
}

/**
 * OpenCode walks the plugin's schemas into one registry so `.describe()`/`.meta()` survive
 * when the plugin brought its own copy of zod; the same here.
 */
function metadataOf(roots) {
  const registry = z.registry()
  const seen = new Set()
  const visit = (s) => {
    if (!isZod(s) || seen.has(s)) return
    seen.add(s)
    const meta = typeof s.meta === "function" ? s.meta() : undefined
    if (meta && Object.keys(meta).length) registry.add(s, meta)
    for (const v of Object.values(s._zod?.def ?? {})) walk(v)
  }
  const walk = (v) => {
    if (isZod(v)) visit(v)
    else if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) Object.values(v).forEach(walk)
  }
  roots.forEach(visit)
  return registry
}

function normalizeSchema(s) {
  if (Array.isArray(s)) return s.map(normalizeSchema)
  if (s === null || typeof s !== "object") return s
  const out = {}
  for (const [k, v] of Object.entries(s)) {
    if ((k === "exclusiveMinimum" || k === "exclusiveMaximum") && typeof v === "boolean") continue
    out[k === "$defs" ? "definitions" : k] = normalizeSchema(v)
  }
  return out
}

const validators = new SafeWeakMap() // tool definition -> z.object of its args (or null)

/** The tool's own zod object, built once per definition. */
function validatorOf(def) {
  if (!validators.has(def)) {
    const values = Object.values(def.args ?? {})
    validators.set(def, values.length > 0 && values.every(isZod) ? z.object(def.args) : null)
  }
  return validators.get(def)
}

async function invoke(msg) {
  const { tool: name, args, context, before, after, budgetMs, afterBudgetMs, truncate } = msg.body
  const def = toolDefs.get(`${msg.instance}\u0000${name}`)
  if (!def) throw fail("unsupported", `tool ${name} is not loaded in this host`)
  let parsedArgs = args ?? {}
  const validator = validatorOf(def)
  if (validator) {
    const result = validator.safeParse(parsedArgs)
    if (!result.success) throw fail("invalid-arguments", `arguments do not match ${name}'s schema: ${z.prettifyError ? z.prettifyError(result.error) : result.error.message}`)
    parsedArgs = result.data
  }
  const controller = new AbortController()
  cancels.set(msg.cancel_id, controller)
  const ctx = {
    sessionID: context?.sessionID ?? "berth",
    messageID: context?.messageID ?? `msg_${msg.id}`,
    callID: context?.callID ?? `call_${msg.id}`,
    agent: context?.agent ?? "berth",
    directory: context?.directory,
    worktree: context?.worktree,
    abort: controller.signal,
    extra: {},
    messages: [],
    metadata(input) {
      send({ t: "meta", v: PROTOCOL_VERSION, id: msg.id, title: input?.title ?? null, metadata: input?.metadata ?? null })
    },
    /** OpenCode's `ask`: resolves when allowed, rejects when denied or unanswered. */
    async ask(request) {
      await upcall(msg.instance, "permission.ask", {
        tool: name,
        sessionID: context?.sessionID ?? "berth",
        messageID: context?.messageID ?? `msg_${msg.id}`,
        callID: context?.callID ?? `call_${msg.id}`,
        deadlineMs: msg.deadline_ms,
        request: { permission: request?.permission, patterns: request?.patterns ?? [], always: request?.always ?? [], metadata: request?.metadata ?? {} },
      })
    },
  }
  const hookInput = { tool: name, sessionID: ctx.sessionID, callID: ctx.callID }
  try {
    // OpenCode's order around every tool call: `tool.execute.before` mutates the very args
    // object `execute` gets (a replaced `output.args` is ignored), `tool.execute.after`
    // transforms the result (reassigning its fields works).
    // Beyond OpenCode (seed 003 §6.2): what the hooks left is checked against the tool's own
    // schema again, and the tool runs on exactly the arguments that passed.
    let changedArgs = []
    if (before?.length) {
      const givenArgs = frameJson(parsedArgs)
      const chained = await hookChain({ name: "tool.execute.before", instances: before, input: hookInput, output: { args: parsedArgs }, budgetMs })
      if (frameJson(parsedArgs) !== givenArgs) {
        changedArgs = chained.steps.map((s) => s.instance)
        if (validator) {
          const again = validator.safeParse(parsedArgs)
          if (!again.success) throw fail("invalid-arguments", `after tool.execute.before (plugins: ${changedArgs.join(", ")}) the arguments no longer match ${name}'s schema: ${z.prettifyError ? z.prettifyError(again.error) : again.error.message}`)
          parsedArgs = again.data
        }
      }
    }
    // A V2 tool decodes its input after `execute.before` (OpenCode 2's order, D-044).
    if (def.decode) parsedArgs = await def.decode(parsedArgs)
    // The arguments the tool really got, for the receipt.
    const ranWith = changedArgs.length ? { finalArgs: parsedArgs } : {}
    // OpenCode truncates the tool's own result before `tool.execute.after` sees it.
    const own = await def.execute(parsedArgs, ctx)
    const result = truncate ? truncateResult(normalizeResult(own, truncate.keepMax), truncate, MAX_OUTPUT, fail) : normalizeResult(own)
    // Berth's own fields first: serialising plugin values may run plugin getters, and what
    // is written before them is out of their reach (`frameJson`).
    if (!after?.length) return { transformedBy: changedArgs, ...ranWith, ...result }
    // The full text is Berth's, not the hooks'.
    const { full, spilled, ...seen } = result
    const kept = { ...(full === undefined ? {} : { full }), ...(spilled === undefined ? {} : { spilled }) }
    const raw = structuredClone(seen)
    const chained = await hookChain({ name: "tool.execute.after", instances: after, input: { ...hookInput, args: parsedArgs }, output: seen, budgetMs: afterBudgetMs ?? budgetMs })
    const final = chained.output
    if (!isPlainObject(final) || typeof final.output !== "string") throw fail("invalid-response", `tool.execute.after left a result without an output string (plugins: ${after.join(", ")})`)
    const changed = frameJson(final) !== frameJson(raw)
    const by = [...changedArgs, ...chained.steps.map((s) => s.instance)]
    return { transformedBy: new SafeSet(by).values(), ...ranWith, ...kept, raw: changed ? raw : null, ...normalizeResult(final) }
  } finally {
    cancels.delete(msg.cancel_id)
  }
}

/**
 * OpenCode's normalisation: a string, or {title?, output, metadata?, attachments?}. The output
 * may be as large as `limit` (a tool's own result, truncated next) or the frame budget.
 */
function normalizeResult(raw, limit = MAX_OUTPUT) {
  let result
  if (typeof raw === "string") result = { title: "", output: raw, metadata: {} }
  else if (raw !== null && typeof raw === "object" && typeof raw.output === "string")
    result = { title: raw.title ?? "", output: raw.output, metadata: raw.metadata ?? {}, attachments: raw.attachments }
  else throw fail("invalid-response", `the tool returned ${raw === null ? "null" : typeof raw}; a tool must return a string or { output: string } (OpenCode fails on this too)`)
  if (bufferByteLength(result.output) > limit) throw fail("invalid-response", `the tool's output is over ${limit} bytes`)
  return result
}

// ---- server plugins (OpenCode 1.18.4's loader, spec §2.4) ------------------------------------
const hooksByInstance = new SafeMap() // instance -> [Hooks objects, in export order]

const isPlainObject = (v) => v !== null && typeof v === "object" && !isArray(v)

/**
 * Imports a plugin module and runs its factories, exactly as OpenCode does:
 * a v1 default export `{id?, server}` calls only `server`; otherwise every export is a factory
 * (alphabetical by export name, deduplicated by identity), and one non-function export
 * rejects the whole module before any factory runs. A factory that throws rolls back the
 * whole module's contributions.
 */
async function loadPlugin(instance, { path, version, options, kind, packageName, context, serverUrl, serverToken, manifest }) {
  await admit(manifest)
  const service = new URLCtor(serverUrl ?? "http://127.0.0.1:9/")
  if (serverToken) serverTokens.set(originOf(service.href), serverToken)
  serverInstances.set(originOf(service.href), instance)
  const url = pathToFileURL(path).href + (version ? `?v=${version}` : "")
  const mod = await importApproved(url)
  const input = pluginInput(instance, context, service)
  const factories = []
  let id
  const d = mod.default
  if (isV2Definition(d) && d.server === undefined) return loadV2(instance, d, options, context)
  if (isPlainObject(d) && ("id" in d || "server" in d || "tui" in d)) {
    if (d.server !== undefined && typeof d.server !== "function") throw fail("plugin-failed", "the default export's `server` is not a function")
    if (d.tui !== undefined && typeof d.tui !== "function") throw fail("plugin-failed", "the default export's `tui` is not a function")
    if (d.server && d.tui) throw fail("plugin-failed", "a module may not export both `server` and `tui`")
    if (!d.server) throw fail("unsupported", "the module only has a `tui` entry; Berth hosts server plugins")
    id = typeof d.id === "string" && d.id.trim() ? d.id.trim() : undefined
    if (!id && kind === "file") throw fail("plugin-failed", `Path plugin ${path} must export id`)
    factories.push(d.server)
    id ??= packageName
  } else {
    const seen = new SafeSet()
    const names = arraySort(objectKeys(mod))
    for (let i = 0; i < names.length; i++) {
      const name = names[i]
      const v = mod[name]
      if (seen.has(v)) continue
      seen.add(v)
      if (typeof v === "function") arrayPush(factories, v)
      else if (isPlainObject(v) && typeof v.server === "function") arrayPush(factories, v.server)
      else throw fail("plugin-failed", `Plugin export is not a function (export \`${name}\`)`)
    }
  }
  const collected = []
  for (let i = 0; i < factories.length; i++) {
    // A throw here rolls the whole module back: nothing of it is registered.
    const hooks = await factories[i](input, options ?? undefined)
    arrayPush(collected, isPlainObject(hooks) ? hooks : {})
  }
  hooksByInstance.set(instance, collected)
  const tools = []
  const hookNames = new SafeSet()
  const auth = []
  for (let h = 0; h < collected.length; h++) {
    const hooks = collected[h]
    if (isPlainObject(hooks.auth) && typeof hooks.auth.provider === "string") {
      const methods = Array.isArray(hooks.auth.methods) ? hooks.auth.methods : []
      arrayPush(auth, {
        provider: hooks.auth.provider,
        methods: methods.map((m) => ({ type: String(m?.type ?? ""), label: String(m?.label ?? ""), prompts: Array.isArray(m?.prompts) ? m.prompts.map((p) => ({ type: p?.type, key: p?.key, message: p?.message })) : [] })),
      })
    }
    const entries = objectEntries(hooks)
    for (let e = 0; e < entries.length; e++) {
      const [name, value] = entries[e]
      if (name === "tool" && isPlainObject(value)) {
        const defs = objectEntries(value)
        for (let t = 0; t < defs.length; t++) {
          const [toolName, def] = defs[t]
          if (!isToolDefinition(def)) continue
          toolDefs.set(`${instance}\u0000${toolName}`, def)
          arrayPush(tools, { name: toolName, description: String(def.description ?? ""), parameters: toJsonSchema(def.args) })
        }
      } else if ((typeof value === "function" && HOOK_NAMES.has(name)) || (isPlainObject(value) && (name === "auth" || name === "provider"))) {
        // Only names OpenCode ever triggers count: a helper export called as a factory may
        // return any object (opencode-wakatime's returns the PluginInput, with `$` and `client`).
        hookNames.add(name)
      }
    }
  }
  // A module with `setup` beside `server` is V1 + V2: OpenCode 1.18.29+ runs `server`, so does Berth.
  const generation = isV2Definition(d) ? "v1+v2" : "v1"
  return { id: id ?? null, generation, factories: factories.length, hooks: arraySort(hookNames.values()), tools, auth }
}

/** A V2-only module (`{ id, setup }`): set up through the V2 adapter (`v2.mjs`, D-044). */
async function loadV2(instance, d, options, context = {}) {
  const project = context.project ?? {}
  const worktree = project.worktree ?? context.worktree
  const v2 = await setupV2(d, {
    instance,
    options: isPlainObject(options) ? options : {},
    location: { directory: context.directory, project: { id: project.id ?? "global", directory: worktree, canonical: worktree } },
    appVersion: V2_API_VERSION,
    upcall: (method, body) => upcall(instance, method, body),
    loadEffect,
    fail,
    toJsonSchema: (schema) => normalizeSchema(z.toJSONSchema(schema, { io: "input" })),
  })
  hooksByInstance.set(instance, [v2.hooks])
  const tools = []
  for (const t of v2.tools) {
    toolDefs.set(`${instance}\u0000${t.name}`, t.def)
    arrayPush(tools, { name: t.name, description: t.description, parameters: t.parameters })
  }
  return { id: v2.id, generation: "v2", factories: 1, hooks: v2.hookNames, tools, auth: [] }
}

/** Berth's one copy of `effect` (host dependencies, 4.0.1), loaded for the first Effect plugin. */
let effectModules = null
async function loadEffect() {
  if (!effectModules) {
    const at = (spec) => (isBun ? Bun.resolveSync(spec, depsDir) : spec)
    const [Effect, Scope, Exit] = await Promise.all(["effect/Effect", "effect/Scope", "effect/Exit"].map((m) => import(at(m))))
    effectModules = { Effect, Scope, Exit }
  }
  return effectModules
}

/** The OpenCode V2 plugin API Berth's adapter follows (`ctx.app.version`; D-044). */
const V2_API_VERSION = "2.3.0"

/** The hooks of OpenCode 1.18.4's `Hooks` interface (spec §1.3) that are functions. */
const HOOK_NAMES = new SafeSet([
  "dispose", "event", "config", "chat.message", "chat.params", "chat.headers", "permission.ask",
  "command.execute.before", "tool.execute.before", "tool.execute.after", "shell.env", "tool.definition",
  "experimental.chat.messages.transform", "experimental.chat.system.transform", "experimental.provider.small_model",
  "experimental.session.compacting", "experimental.compaction.autocontinue", "experimental.text.complete",
])

// ---- auth hooks: login flows ------------------------------------------------------------------
const flows = new SafeMap() // flow id -> callback of an OAuth result
let nextFlow = 1

/** The last `auth` hook of `instance` for `provider` (as `opencode auth login` picks). */
function authHookOf(instance, provider) {
  const found = (hooksByInstance.get(instance) ?? []).filter((h) => isPlainObject(h.auth) && h.auth.provider === provider)
  const hook = found.at(-1)?.auth
  if (!hook) throw fail("unsupported", `${instance} registers no login for provider ${provider}`)
  return hook
}

/** Starts one login method. Credentials travel back to the supervisor only, never to a log. */
async function authAuthorize(instance, { provider, method, inputs }) {
  const m = authHookOf(instance, provider).methods?.[method]
  if (!m) throw fail("invalid-arguments", `provider ${provider} has no login method ${method}`)
  if (typeof m.authorize !== "function") {
    if (m.type === "api") return { kind: "key-needed" }
    throw fail("invalid-response", `login method ${method} of ${provider} has no authorize()`)
  }
  const r = await m.authorize(inputs ?? {})
  if (isPlainObject(r) && typeof r.url === "string" && typeof r.callback === "function") {
    const flow = `flow_${nextFlow++}`
    flows.set(flow, r.callback)
    return { kind: "oauth", flow, url: r.url, instructions: String(r.instructions ?? ""), method: r.method === "code" ? "code" : "auto" }
  }
  if (isPlainObject(r) && (r.type === "success" || r.type === "failed")) return { kind: "result", result: r }
  throw fail("invalid-response", `login method ${method} of ${provider} returned neither a result nor an OAuth step`)
}

async function authCallback({ flow, code }) {
  const callback = flows.get(flow)
  if (!callback) throw fail("invalid-arguments", `no login in progress with id ${flow}`)
  flows.delete(flow)
  const r = await (code === null || code === undefined ? callback() : callback(code))
  if (!isPlainObject(r)) throw fail("invalid-response", "the OAuth callback returned no result")
  return { result: r }
}



/**
 * The v1 SDK client (`@opencode-ai/sdk` 1.18.4) as Berth serves it: every method goes to Berth
 * (crates/runtime/src/world.rs decides: served, or a stable `unsupported` answer naming the
 * method, the OpenCode version, the plugin and an alternative). Answers have the SDK's
 * hey-api shape `{ data, error }` and throw only with `throwOnError`, as the SDK does. Unknown
 * methods never crash, hang or loop.
 */
function makeClient(instance) {
  const call = async (path, options) => {
    let answer
    try {
      answer = await upcall(instance, `client.${path}`, plain(options))
    } catch (e) {
      answer = { status: 503, error: { name: "UnknownError", code: e?.berthCode ?? "temporarily-unavailable", message: String(e?.message ?? e) } }
    }
    if (answer && "error" in answer) {
      if (options?.throwOnError) throw Object.assign(new Error(answer.error?.message ?? answer.error?.data?.message ?? `client.${path} failed`), answer.error)
      return { data: undefined, error: answer.error, response: undefined }
    }
    return { data: answer?.data, error: undefined, response: undefined }
  }
  const node = (path) =>
    new Proxy(function () {}, {
      apply(_t, _this, args) {
        return call(path, args[0])
      },
      get(_t, key) {
        if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined
        return node(path ? `${path}.${key}` : key)
      },
    })
  return node("")
}

/** The JSON-safe part of a client call's options (functions such as a custom fetch are dropped). */
function plain(options) {
  if (options === undefined || options === null) return null
  try {
    return JSON.parse(JSON.stringify({ path: options.path, query: options.query, body: options.body }))
  } catch {
    return null
  }
}

/** On Node there is no Bun shell: each use fails on its own, with a stable error. */
function nodeShell(instance) {
  const refuse = () => {
    throw fail("unsupported", `Bun's shell ($) is not available when ${instance} runs on Node; Berth runs it on Bun when Bun is installed (run scripts/setup or set BERTH_BUN)`)
  }
  return new Proxy(refuse, { get: () => refuse })
}

/**
 * The `PluginInput` OpenCode 1.18.4 passes a factory (`Plugin.state`), key order and shapes as
 * recorded in tests/oracle/plugin-input.json. `context.project` is computed by the supervisor
 * as OpenCode resolves it (catalog.rs `opencode_project`: id from the `origin` remote, the
 * `.git/opencode` cache or the root commit; `global` and worktree `/` without git). `project`
 * is what OpenCode passes on the first open of a project: no `name`/`icon`/`commands`, no
 * sandboxes, the times now (D-021). `serverUrl` is the plugin's own loopback service (D-018),
 * read through a getter as in OpenCode.
 */
function pluginInput(instance, context = {}, service) {
  // OpenCode's client is the v1 SDK object: these groups are own properties holding objects
  // (their methods live on prototypes), and the client also answers to
  // `postSessionIdPermissionsPermissionId`. Here every group forwards to the `up`-frame
  // client; a name OpenCode lacks still gets a callable that answers `unsupported` (D-017).
  const groups = ["global", "project", "pty", "config", "tool", "instance", "path", "vcs", "session", "command", "provider", "find", "file", "app", "mcp", "lsp", "formatter", "tui", "auth", "event"]
  const root = makeClient(instance)
  const forward = (t, key, to) => (typeof key !== "string" || key in t ? t[key] : to[key])
  const target = {}
  for (const g of groups) target[g] = new Proxy({}, { get: (t, key) => forward(t, key, root[g]) })
  const client = new Proxy(target, {
    get: (t, key) => forward(t, key, root),
    has: (t, key) => key in t || key === "postSessionIdPermissionsPermissionId",
  })
  const project = context.project ?? {}
  const worktree = project.worktree ?? context.worktree
  const url = new URLCtor(service.href)
  const now = Date.now()
  return {
    client,
    project: { id: project.id ?? "global", worktree, vcs: project.vcs ?? undefined, sandboxes: [], time: { created: now, updated: now } },
    worktree,
    directory: context.directory,
    experimental_workspace: { register(_type, _adaptor) {} },
    get serverUrl() {
      return url
    },
    $: isBun ? Bun.$ : nodeShell(instance),
  }
}

/** Hooks whose read-back ignores reassignment of these output keys (spec §1.3). */
const IN_PLACE = {
  "chat.message": ["message", "parts"],
  "command.execute.before": ["parts"],
  "tool.execute.before": ["args"],
  "experimental.chat.messages.transform": ["messages"],
  "experimental.chat.system.transform": ["system"],
}
/** Hooks whose throw OpenCode only logs. */
const LOG_ONLY = new SafeSet(["config", "dispose"])

/** Whether `v` serialises to more than a frame can carry (a cycle counts as too large). */
function outputTooLarge(v) {
  try {
    return frameJson(v).length > MAX_FRAME
  } catch {
    return true
  }
}

/** Time one plugin's hook may take when a request names none (the supervisor sends the
 * policy's `budget.hook` with every chain). */
const HOOK_BUDGET_MS = 10_000

/** Rejects with `timeout` (naming the hook and plugin) when `promise` outlives `ms`. */
async function withBudget(promise, ms, name, instance) {
  let timer
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(fail("timeout", `hook ${name} of ${instance} did not finish within its ${ms} ms budget`)), ms)
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Runs one hook through the instances in order on one shared `output`, as OpenCode's
 * `trigger` does: sequential, awaited, return values ignored; a throw stops the chain
 * (except for `config`/`dispose`, which only log); `event` is not awaited. Beyond OpenCode:
 * each step has a time budget, and after each step the output must still be an object that
 * fits in a frame — a failure names the hook and the plugin.
 */
async function hookChain({ name, instances, input, output, budgetMs }) {
  const budget = Number.isFinite(budgetMs) && budgetMs > 0 ? budgetMs : HOOK_BUDGET_MS
  const kept = {}
  for (const key of IN_PLACE[name] ?? []) kept[key] = output?.[key]
  const steps = []
  let answeredBy
  for (const instance of instances) {
    for (const hooks of hooksByInstance.get(instance) ?? []) {
      const fn = hooks[name]
      if (typeof fn !== "function") continue
      const before = name === "permission.ask" ? output?.status : undefined
      if (name === "event") {
        try {
          Promise.resolve(fn(input)).catch((e) => process.stderr.write(`berth-host: ${instance} event hook failed: ${e?.message ?? e}\n`))
        } catch (e) {
          process.stderr.write(`berth-host: ${instance} event hook failed: ${e?.message ?? e}\n`)
        }
        steps.push({ instance, ok: true })
        continue
      }
      if (name === "dispose") {
        try {
          await withBudget(fn(), budget, name, instance)
          steps.push({ instance, ok: true })
        } catch (e) {
          process.stderr.write(`berth-host: ${instance} dispose hook failed: ${e?.message ?? e}\n`)
          steps.push({ instance, ok: false, error: String(e?.message ?? e) })
        }
        continue
      }
      try {
        // `config` receives the live config object alone (OpenCode calls `config(cfg)`).
        await withBudget(name === "config" ? fn(output) : fn(input, output), budget, name, instance)
      } catch (e) {
        if (LOG_ONLY.has(name)) {
          steps.push({ instance, ok: false, error: String(e?.message ?? e) })
          continue
        }
        const err = e?.berthCode === "timeout" ? e : fail(stoppedByBoundary(e) ? "policy-limited" : "plugin-failed", `hook ${name} of ${instance} threw: ${e?.message ?? e}`)
        err.berthPlugin = instance
        throw err
      }
      if (name !== "config" && output !== undefined && !isPlainObject(output)) throw fail("invalid-response", `hook ${name} of ${instance} left output that is not an object`)
      if (output !== undefined && outputTooLarge(output)) throw fail("invalid-response", `hook ${name} of ${instance} grew the output over ${MAX_FRAME} bytes or left it unserialisable`)
      if (name === "permission.ask" && output?.status !== before) answeredBy = instance
      steps.push({ instance, ok: true })
    }
  }
  const final = isPlainObject(output) ? { ...output, ...kept } : output
  // The steps (who ran, who answered) before the plugins' output: see `invoke`.
  return { steps, answeredBy, output: final }
}
