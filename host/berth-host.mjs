// Berth's plugin host: runs approved plugin and tool modules on Bun or Node, unchanged on
// both, and answers the supervisor over a private Unix socket (length-prefixed JSON frames;
// see crates/protocol). The plugin's own stdout/stderr are not the channel.
//
// Owns: importing modules the supervisor names, calling them, shaping results.
// Must not: decide what may run (the supervisor's gate already did), read Berth's store, or
// let a plugin's failure take down other calls.
import net from "node:net"
import { pathToFileURL } from "node:url"

const PROTOCOL_VERSION = 1
const MAX_FRAME = 8 * 1024 * 1024
const MAX_OUTPUT = 1024 * 1024

// The handshake secrets are read once and removed, so plugin code does not inherit them.
const env = process.env
const socketPath = env.BERTH_HOST_SOCKET
const secret = env.BERTH_HOST_SECRET
const generation = Number(env.BERTH_HOST_GENERATION)
const depsDir = env.BERTH_HOST_DEPS
for (const k of ["BERTH_HOST_SOCKET", "BERTH_HOST_SECRET", "BERTH_HOST_GENERATION"]) delete env[k]

const isBun = typeof globalThis.Bun !== "undefined"
const runtime = isBun ? "bun" : "node"
const runtimeVersion = isBun ? Bun.version : process.versions.node

await installResolver()
// The same zod module instance the plugins get through `@opencode-ai/plugin` (ESM, resolved
// by the hook above), so `.describe()` metadata lives in one registry.
const { z } = await import(isBun ? Bun.resolveSync("zod", depsDir) : "zod")

/** Bare imports a plugin cannot resolve next to itself resolve from Berth's deps dir. */
async function installResolver() {
  if (isBun) {
    Bun.plugin({
      name: "berth-deps",
      setup(build) {
        build.onResolve({ filter: /^[^./]/ }, (args) => {
          if (args.path.startsWith("node:") || args.path.startsWith("bun:") || args.path === "bun") return
          try {
            return { path: Bun.resolveSync(args.path, args.importer) }
          } catch {
            return { path: Bun.resolveSync(args.path, depsDir) }
          }
        })
      },
    })
    return
  }
  const { register } = await import("node:module")
  const hooks = new URL("./node-loader.mjs", import.meta.url).href
  register(hooks, { data: { depsDir } })
}

// ---- framing -------------------------------------------------------------------------------
const sock = net.createConnection(socketPath)
sock.setNoDelay?.(true)
let buffered = Buffer.alloc(0)

function send(msg) {
  const body = Buffer.from(JSON.stringify(msg))
  if (body.length > MAX_FRAME) {
    if (msg.t === "res") return send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: false, value: null, error: { code: "invalid-response", message: `the result is ${body.length} bytes, over the ${MAX_FRAME}-byte frame limit` } })
    return
  }
  const head = Buffer.alloc(4)
  head.writeUInt32BE(body.length)
  sock.write(Buffer.concat([head, body]))
}

sock.on("connect", () => {
  send({ t: "hello", v: PROTOCOL_VERSION, secret, generation, pid: process.pid, runtime, runtime_version: runtimeVersion })
})
sock.on("data", (chunk) => {
  buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk
  for (;;) {
    if (buffered.length < 4) return
    const len = buffered.readUInt32BE(0)
    if (len > MAX_FRAME) return die("oversized frame from the supervisor")
    if (buffered.length < 4 + len) return
    const body = buffered.subarray(4, 4 + len)
    buffered = buffered.subarray(4 + len)
    let msg
    try {
      msg = JSON.parse(body.toString("utf8"))
    } catch {
      return die("malformed frame from the supervisor")
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

// A plugin's stray rejection or exception must not end the host.
process.on("unhandledRejection", (e) => process.stderr.write(`berth-host: unhandled rejection: ${e?.stack ?? e}\n`))
process.on("uncaughtException", (e) => process.stderr.write(`berth-host: uncaught exception: ${e?.stack ?? e}\n`))

// ---- requests ------------------------------------------------------------------------------
const cancels = new Map() // cancel_id -> AbortController
const toolDefs = new Map() // `${instance}\u0000${name}` -> tool definition (tool files and plugin `tool` hooks)

function onMessage(msg) {
  if (msg.t === "cancel") {
    cancels.get(msg.cancel_id)?.abort(new Error("cancelled"))
    return
  }
  if (msg.t !== "req") return
  send({ t: "ack", v: PROTOCOL_VERSION, id: msg.id })
  handle(msg).then(
    (value) => send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: true, value, error: null }),
    (err) => send({ t: "res", v: PROTOCOL_VERSION, id: msg.id, ok: false, value: null, error: toWireError(err) }),
  )
}

function toWireError(err) {
  const code = typeof err?.berthCode === "string" ? err.berthCode : "plugin-failed"
  const message = String(err?.message ?? err).slice(0, 4000)
  return { code, message }
}

function fail(code, message) {
  const e = new Error(message)
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
    default:
      throw fail("unsupported", `unknown call kind ${msg.kind}`)
  }
}

function isToolDefinition(v) {
  return v !== null && typeof v === "object" && "args" in v && "description" in v && "execute" in v
}

/** Imports a standalone tool file and describes its tools exactly as OpenCode 1.18.4 names them. */
async function loadTools(instance, { path, stem, version }) {
  const url = pathToFileURL(path).href + (version ? `?v=${version}` : "")
  const mod = await import(url)
  const out = []
  for (const [exportName, value] of Object.entries(mod)) {
    if (!isToolDefinition(value)) continue
    const name = exportName === "default" ? stem : `${stem}_${exportName}`
    const parameters = toJsonSchema(value.args)
    toolDefs.set(`${instance}\u0000${name}`, value)
    out.push({ name, description: String(value.description ?? ""), parameters })
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

const validators = new WeakMap() // tool definition -> z.object of its args (or null)

/** The tool's own zod object, built once per definition. */
function validatorOf(def) {
  if (!validators.has(def)) {
    const values = Object.values(def.args ?? {})
    validators.set(def, values.length > 0 && values.every(isZod) ? z.object(def.args) : null)
  }
  return validators.get(def)
}

async function invoke(msg) {
  const { tool: name, args, context } = msg.body
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
    async ask(request) {
      throw fail("action-required", `the tool asks for permission "${request?.permission ?? "?"}"; permission prompts are answered in the Berth app (not available on this path yet)`)
    },
  }
  try {
    const raw = await def.execute(parsedArgs, ctx)
    return normalizeResult(raw)
  } finally {
    cancels.delete(msg.cancel_id)
  }
}

/** OpenCode's normalisation: a string, or {title?, output, metadata?, attachments?}. */
function normalizeResult(raw) {
  let result
  if (typeof raw === "string") result = { title: "", output: raw, metadata: {} }
  else if (raw !== null && typeof raw === "object" && typeof raw.output === "string")
    result = { title: raw.title ?? "", output: raw.output, metadata: raw.metadata ?? {}, attachments: raw.attachments }
  else throw fail("invalid-response", `the tool returned ${raw === null ? "null" : typeof raw}; a tool must return a string or { output: string } (OpenCode fails on this too)`)
  if (Buffer.byteLength(result.output) > MAX_OUTPUT) throw fail("invalid-response", `the tool's output is over ${MAX_OUTPUT} bytes`)
  return result
}

// ---- server plugins (OpenCode 1.18.4's loader, spec §2.4) ------------------------------------
const hooksByInstance = new Map() // instance -> [Hooks objects, in export order]

const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v)

/**
 * Imports a plugin module and runs its factories, exactly as OpenCode does:
 * a v1 default export `{id?, server}` calls only `server`; otherwise every export is a factory
 * (alphabetical by export name, deduplicated by identity), and one non-function export
 * rejects the whole module before any factory runs. A factory that throws rolls back the
 * whole module's contributions.
 */
async function loadPlugin(instance, { path, version, options, kind, packageName, context }) {
  const url = pathToFileURL(path).href + (version ? `?v=${version}` : "")
  const mod = await import(url)
  const input = pluginInput(instance, context)
  const factories = []
  let id
  const d = mod.default
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
    const seen = new Set()
    for (const name of Object.keys(mod).sort()) {
      const v = mod[name]
      if (seen.has(v)) continue
      seen.add(v)
      if (typeof v === "function") factories.push(v)
      else if (isPlainObject(v) && typeof v.server === "function") factories.push(v.server)
      else throw fail("plugin-failed", `Plugin export is not a function (export \`${name}\`)`)
    }
  }
  const collected = []
  for (const factory of factories) {
    // A throw here rolls the whole module back: nothing of it is registered.
    const hooks = await factory(input, options ?? undefined)
    collected.push(isPlainObject(hooks) ? hooks : {})
  }
  hooksByInstance.set(instance, collected)
  const tools = []
  const hookNames = new Set()
  for (const hooks of collected) {
    for (const [name, value] of Object.entries(hooks)) {
      if (name === "tool" && isPlainObject(value)) {
        for (const [toolName, def] of Object.entries(value)) {
          if (!isToolDefinition(def)) continue
          toolDefs.set(`${instance}\u0000${toolName}`, def)
          tools.push({ name: toolName, description: String(def.description ?? ""), parameters: toJsonSchema(def.args) })
        }
      } else if (typeof value === "function" || (isPlainObject(value) && (name === "auth" || name === "provider"))) {
        hookNames.add(name)
      }
    }
  }
  return { id: id ?? null, factories: factories.length, hooks: [...hookNames].sort(), tools }
}


const OPENCODE_VERSION = "1.18.4"

/** What to use instead, for the client groups Berth does not serve yet. */
const ALTERNATIVES = {
  tui: "show messages with client.app.log; Berth's app shows plugin messages in its log",
  session: "Berth runs no OpenCode sessions; use tool context (ctx.sessionID, ctx.messages) inside tools",
  config: "read your options from the plugin's second argument",
  auth: "credentials are stored by Berth's approval flow (not yet available to plugins)",
}

/**
 * The v1 SDK client (`@opencode-ai/sdk` 1.18.4) as Berth serves it: `app.log` goes to Berth's
 * log; every other method answers, without throwing (hey-api style `{ data, error }`), a
 * stable `unsupported` error naming the method, the OpenCode version, the plugin and what to do
 * instead. Writes never pretend to succeed; unknown methods never crash, hang or loop.
 */
function makeClient(instance) {
  const warned = new Set()
  const supported = {
    "app.log": async (options) => {
      const body = options?.body ?? {}
      const message = `${body.service ? `[${body.service}] ` : ""}${String(body.message ?? "")}`
      send({ t: "note", v: PROTOCOL_VERSION, instance, level: String(body.level ?? "info"), message })
      return { data: true, error: undefined }
    },
  }
  const unsupported = (path) => async () => {
    const group = path.split(".")[0]
    if (!warned.has(path)) {
      warned.add(path)
      process.stderr.write(`berth-host: ${instance} called client.${path}, which Berth does not support\n`)
    }
    return {
      data: undefined,
      error: {
        name: "UnsupportedError",
        code: "unsupported",
        method: path,
        opencodeVersion: OPENCODE_VERSION,
        plugin: instance,
        message: `client.${path} (OpenCode ${OPENCODE_VERSION} API) is not supported by Berth; plugin ${instance}`,
        alternative: ALTERNATIVES[group] ?? "none yet; the plugin should treat this call as unavailable",
      },
      response: undefined,
    }
  }
  const node = (path) =>
    new Proxy(function () {}, {
      apply(_t, _this, args) {
        return supported[path] ? supported[path](...args) : unsupported(path)()
      },
      get(_t, key) {
        if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined
        return node(path ? `${path}.${key}` : key)
      },
    })
  return node("")
}

/** On Node there is no Bun shell: each use fails on its own, with a stable error. */
function nodeShell(instance) {
  const refuse = () => {
    throw fail("unsupported", `Bun's shell ($) is not available when ${instance} runs on Node; Berth runs it on Bun when Bun is installed (run scripts/setup or set BERTH_BUN)`)
  }
  return new Proxy(refuse, { get: () => refuse })
}

/** The `PluginInput` OpenCode passes a factory, as far as Berth provides it today. */
function pluginInput(instance, context = {}) {
  return {
    client: makeClient(instance),
    project: { id: "global", worktree: context.worktree, vcs: "git", time: { created: Date.now() } },
    directory: context.directory,
    worktree: context.worktree,
    experimental_workspace: { register() {} },
    serverUrl: new URL("http://127.0.0.1:9/"),
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
const LOG_ONLY = new Set(["config", "dispose"])

/**
 * Runs one hook through the instances in order on one shared `output`, as OpenCode's
 * `trigger` does: sequential, awaited, return values ignored; a throw stops the chain
 * (except for `config`/`dispose`, which only log); `event` is not awaited.
 */
async function hookChain({ name, instances, input, output }) {
  const kept = {}
  for (const key of IN_PLACE[name] ?? []) kept[key] = output?.[key]
  const steps = []
  for (const instance of instances) {
    for (const hooks of hooksByInstance.get(instance) ?? []) {
      const fn = hooks[name]
      if (typeof fn !== "function") continue
      if (name === "event") {
        try {
          Promise.resolve(fn(input)).catch((e) => process.stderr.write(`berth-host: ${instance} event hook failed: ${e?.message ?? e}\n`))
        } catch (e) {
          process.stderr.write(`berth-host: ${instance} event hook failed: ${e?.message ?? e}\n`)
        }
        steps.push({ instance, ok: true })
        continue
      }
      try {
        // `config` receives the live config object alone (OpenCode calls `config(cfg)`).
        if (name === "config") await fn(output)
        else await fn(input, output)
      } catch (e) {
        if (LOG_ONLY.has(name)) {
          steps.push({ instance, ok: false, error: String(e?.message ?? e) })
          continue
        }
        const err = fail("plugin-failed", `hook ${name} of ${instance} threw: ${e?.message ?? e}`)
        err.berthPlugin = instance
        throw err
      }
      if (name !== "config" && output !== undefined && !isPlainObject(output)) throw fail("invalid-response", `hook ${name} of ${instance} left output that is not an object`)
      steps.push({ instance, ok: true })
    }
  }
  const final = isPlainObject(output) ? { ...output, ...kept } : output
  return { output: final, steps }
}
