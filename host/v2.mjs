// OpenCode V2 plugins in Berth's host (seeds 000/001, wave-2 anchors (f); ledger D-044): a
// default export `{ id, setup }` (Promise) or `{ id, effect }` (Effect, run in a scope of its
// own) is set up with a V2 context, and what it registers is handed
// to the host in V1's shapes — tools like a V1 plugin's `tool` map (through the same
// receipts), its tool hooks as `tool.execute.before/after`, its cleanup as `dispose`, its event
// subscriptions fed by the `event` hook — so approval, supervision, budgets, policy caps and
// updates are the ones V1 plugins have.
//
// Owns: recognising a V2 definition, the setup context, and the mapping of V2 registrations
// and results. Must not: load or gate modules (berth-host.mjs and the loaders do), run a V1
// entry (`{ id, server, setup }` runs `server`, as OpenCode 1.18.29+), or silently accept a
// context part it cannot honour: every such part throws `unsupported` naming the method.

/** A V2 definition: `id` with `setup` (Promise) or `effect` (Effect), OpenCode 2's rule. */
export function isV2Definition(d) {
  return d !== null && typeof d === "object" && typeof d.id === "string" && (typeof d.setup === "function" || typeof d.effect === "function")
}

/** OpenCode 2's tool naming: the name normalised, prefixed by its namespace (dots as `_`). */
function effectiveName(name, namespace) {
  const normalized = String(name ?? "").replace(/[^a-zA-Z0-9_-]/g, "_")
  return namespace === undefined ? normalized : `${String(namespace).replaceAll(".", "_")}_${normalized}`
}
const VALID_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** OpenCode 2's session hooks Berth chains (`berth hook session.<name>`, event in `--output`);
 * `http.request` / `http.response` carry a Request or Response object and are not served. */
const SESSION_HOOKS = new Set(["prompt", "context", "compaction", "generate", "title", "model.request", "retry"])

/** The context parts OpenCode 2 has and Berth does not serve (yet): each method throws. */
const UNSERVED = [
  "agent", "aisdk", "catalog", "command", "credential", "experimental", "generate", "integration", "mcp", "model",
  "permission", "plugin", "provider", "reference", "rpc", "shell", "skill", "vcs", "websearch", "worktree",
]

/**
 * Sets up one V2 plugin. `env`: { instance, options, location, upcall(method, body), fail(code,
 * message), toJsonSchema(zodLike) }. Returns { id, tools: [{ name, description, parameters,
 * def }], hooks (V1's shape), hookNames }.
 */
export async function setupV2(definition, env) {
  const { instance, fail } = env
  const id = definition.id
  // OpenCode 2 reads `effect` first when a definition has both.
  const E = typeof definition.effect === "function" ? await env.loadEffect() : null
  // What a plugin's callback or tool gives back: an Effect (the Effect flavour) is run.
  const settle = (v) => (E && E.Effect.isEffect(v) ? E.Effect.runPromise(v) : v)
  const unsupported = (method) => fail("unsupported", `${id}: ctx.${method} is not served by Berth (OpenCode V2 context); see the deviations ledger D-044`)
  const registrations = [] // { dispose } in registration order
  const before = [] // execute.before callbacks, in registration order
  const after = []
  const tools = new Map() // effective name -> { name, description, parameters, def }
  const sessionHooks = new Map() // hook name -> [{ cb, providerID }] in registration order
  const subscribers = new Set()
  let closed = false

  // One registration in `list` (`entry`: `{ cb, … }`), removed by its `dispose` or on unload.
  const register = (list, entry) => {
    list.push(entry)
    const reg = {
      async dispose() {
        const i = list.indexOf(entry)
        if (i >= 0) list.splice(i, 1)
      },
    }
    registrations.push(reg)
    return reg
  }

  const toolOf = (info) => {
    if (info === null || typeof info !== "object") throw fail("invalid-response", `${id}: tools.add() needs a tool definition object`)
    const options = info.options ?? {}
    const name = effectiveName(info.name, options.namespace)
    if (!VALID_NAME.test(name) || name === "execute") {
      process.stderr.write(`berth-host: ${instance}: skipping invalid tool registration ${JSON.stringify(info.name)} (OpenCode 2 skips it too)\n`)
      return null
    }
    if (typeof info.execute !== "function") throw fail("invalid-response", `${id}: tool ${name} has no execute function`)
    const { parameters, decode } = describeInput(info.input, name)
    const def = {
      description: String(info.description ?? ""),
      args: {},
      decode,
      async execute(args, ctx) {
        const context = {
          sessionID: ctx.sessionID,
          agent: ctx.agent,
          messageID: ctx.messageID,
          id: ctx.callID,
          signal: ctx.abort,
          progress: async (update) => ctx.metadata({ metadata: update }),
        }
        return resultOf(await settle(info.execute(args, context)), name)
      },
    }
    return { name, description: def.description, parameters, def }
  }

  /** The tool's input schema as JSON Schema for the catalog, and how to decode an input. */
  function describeInput(input, name) {
    if (input === undefined || input === null) return { parameters: { type: "object", properties: {} }, decode: null }
    const standard = input["~standard"]
    if (standard && typeof standard.validate === "function") {
      let parameters
      if (typeof standard.jsonSchema?.input === "function") parameters = standard.jsonSchema.input({ target: "draft-2020-12" })
      else if (input._zod) parameters = env.toJsonSchema(input)
      else throw fail("unsupported", `${id}: tool ${name}'s input schema cannot be described as JSON Schema (a Standard Schema without \`jsonSchema\`); give it a JSON Schema`)
      const decode = async (value) => {
        const r = await standard.validate(value)
        if (r.issues) throw fail("invalid-arguments", `arguments do not match ${name}'s schema: ${r.issues.map((i) => `${(i.path ?? []).map((p) => p?.key ?? p).join(".") || "input"}: ${i.message}`).join("; ")}`)
        return r.value
      }
      return { parameters, decode }
    }
    // A plain JSON Schema: OpenCode 2 passes the input through unchecked, and so does Berth.
    if (typeof input === "object" && !Array.isArray(input) && !("ast" in input)) return { parameters: input, decode: null }
    throw fail("unsupported", `${id}: tool ${name}'s input schema is not JSON Schema or a Standard Schema (an Effect Schema needs the Effect flavour)`)
  }

  /** V2's `{ output?, content?, metadata? }` as the host's `{ title, output, metadata }`. */
  function resultOf(raw, name) {
    if (typeof raw === "string") return { title: "", output: raw, metadata: {} }
    if (raw === null || typeof raw !== "object") throw fail("invalid-response", `tool ${name} returned ${raw === null ? "null" : typeof raw}; an OpenCode V2 tool returns { content?, output?, metadata? }`)
    let text
    if (typeof raw.content === "string") text = raw.content
    else if (Array.isArray(raw.content) && raw.content.length) text = raw.content.filter((p) => p?.type === "text").map((p) => String(p.text ?? "")).join("\n")
    else text = raw.output === undefined ? "" : JSON.stringify(raw.output)
    return { title: "", output: text, metadata: raw.metadata ?? {} }
  }

  const editor = {
    add(info) {
      const t = toolOf(info)
      if (t) tools.set(t.name, t)
    },
    list: () => [...tools.values()].map((t) => ({ name: t.name, description: t.description, input: t.parameters })),
    get: (name) => {
      const t = tools.get(name)
      return t ? { name: t.name, description: t.description, input: t.parameters } : undefined
    },
    remove(name) {
      tools.delete(name)
    },
    update() {
      throw unsupported("tool.transform(tools => tools.update)")
    },
    namespace() {
      throw unsupported("tool.transform(tools => tools.namespace)")
    },
  }

  const storage = {
    get: (key) => env.upcall("storage.get", { key: String(key) }).then((v) => v?.value ?? undefined),
    set: (key, value) => env.upcall("storage.set", { key: String(key), value: value === undefined ? null : value }).then(() => undefined),
    remove: (key) => env.upcall("storage.remove", { key: String(key) }).then(() => undefined),
    scan: (opts) => env.upcall("storage.scan", { prefix: String(opts?.prefix ?? ""), after: opts?.after ?? null, limit: opts?.limit ?? null }),
  }

  const subscribe = () => {
    const queue = []
    let wake = null
    const sub = {
      push(event) {
        queue.push(event)
        if (wake) wake()
      },
      end() {
        if (wake) wake()
      },
    }
    subscribers.add(sub)
    return {
      [Symbol.asyncIterator]() {
        return {
          async next() {
            while (!queue.length && !closed && subscribers.has(sub)) await new Promise((r) => (wake = r))
            wake = null
            if (queue.length) return { value: queue.shift(), done: false }
            return { value: undefined, done: true }
          },
          async return() {
            subscribers.delete(sub)
            if (wake) wake()
            return { value: undefined, done: true }
          },
        }
      },
    }
  }

  const ctx = {
    options: env.options ?? {},
    location: env.location,
    app: Object.freeze({ name: "berth", version: env.appVersion }),
    storage,
    tool: {
      async transform(cb) {
        cb(editor)
        return registrations[registrations.push({ async dispose() {} }) - 1]
      },
      async hook(name, cb) {
        if (typeof cb !== "function") throw fail("invalid-response", `${id}: ctx.tool.hook(${JSON.stringify(name)}) needs a function`)
        if (name === "execute.before") return register(before, { cb })
        if (name === "execute.after") return register(after, { cb })
        throw unsupported(`tool.hook(${JSON.stringify(name)})`)
      },
      async list() {
        return editor.list()
      },
      reload() {
        throw unsupported("tool.reload")
      },
    },
    session: new Proxy(
      {
        async hook(name, cb, options) {
          if (typeof cb !== "function") throw fail("invalid-response", `${id}: ctx.session.hook(${JSON.stringify(name)}) needs a function`)
          if (!SESSION_HOOKS.has(name)) throw unsupported(`session.hook(${JSON.stringify(name)})`)
          if (!sessionHooks.has(name)) sessionHooks.set(name, [])
          return register(sessionHooks.get(name), { cb, providerID: options?.providerID })
        },
      },
      { get: (t, p) => (p in t ? t[p] : typeof p === "string" ? () => { throw unsupported(`session.${p}`) } : undefined) },
    ),
    event: { subscribe },
  }
  for (const part of UNSERVED) {
    ctx[part] = new Proxy({}, { get: (_, p) => (typeof p === "string" ? () => { throw unsupported(`${part}.${p}`) } : undefined) })
  }

  let cleanup
  if (E) {
    // The Effect flavour: the plugin's Effect runs in a scope of its own; its finalizers run
    // when Berth unloads it (the scope is closed), as OpenCode 2 closes a plugin's scope.
    const { Effect, Scope, Exit } = E
    const scope = await Effect.runPromise(Scope.make())
    try {
      await Effect.runPromise(Scope.provide(scope)(definition.effect(effectContext(ctx, Effect))))
    } catch (e) {
      await Effect.runPromise(Scope.close(scope, Exit.void)).catch(() => {})
      throw e
    }
    cleanup = () => Effect.runPromise(Scope.close(scope, Exit.void))
  } else {
    cleanup = await definition.setup(ctx)
  }

  // V1's shapes, for the host's chains. The before hooks see the call's input before the
  // tool decodes it (V2's rule); a `Tool.Error` (or any throw) refuses the call.
  const hooks = {
    async "tool.execute.before"(input, output) {
      if (!before.length) return
      const event = { tool: input.tool, sessionID: input.sessionID, agent: input.agent ?? "berth", messageID: input.messageID, id: input.callID, input: output.args }
      for (const { cb } of [...before]) await settle(cb(event))
      if (event.tool !== input.tool) throw fail("unsupported", `${id}: renaming a call in execute.before (to ${JSON.stringify(event.tool)}) is not served by Berth`)
      if (event.input !== output.args) {
        // V1 keeps the args object (a replaced `output.args` is ignored): the new input is
        // written into it, so the tool runs on what the hook left.
        for (const k of Object.keys(output.args ?? {})) delete output.args[k]
        Object.assign(output.args, event.input ?? {})
      }
    },
    async "tool.execute.after"(input, output) {
      if (!after.length) return
      const result = { content: output.output, metadata: output.metadata }
      const event = { tool: input.tool, sessionID: input.sessionID, agent: input.agent ?? "berth", messageID: input.messageID, id: input.callID, input: input.args, status: "completed", result }
      for (const { cb } of [...after]) await settle(cb(event))
      const mapped = resultOf(event.result ?? result, input.tool)
      output.output = mapped.output
      output.metadata = mapped.metadata
    },
    event({ event }) {
      for (const s of subscribers) s.push(event)
    },
    async dispose() {
      closed = true
      for (const s of subscribers) s.end()
      subscribers.clear()
      for (const reg of registrations.splice(0).reverse()) await reg.dispose()
      if (typeof cleanup === "function") await cleanup()
    },
  }
  // Session hooks: the event is the chain's output, changed in place by each callback in
  // registration order (a callback with a `providerID` sees only that provider's events).
  for (const name of sessionHooks.keys()) {
    hooks[`session.${name}`] = async (_input, event) => {
      for (const { cb, providerID } of [...sessionHooks.get(name)]) {
        if (providerID !== undefined && event?.model?.providerID !== providerID) continue
        await settle(cb(event))
      }
    }
  }
  const hookNames = ["dispose", "event", ...[...sessionHooks.keys()].map((n) => `session.${n}`)]
  if (before.length) hookNames.push("tool.execute.before")
  if (after.length) hookNames.push("tool.execute.after")
  return { id, tools: [...tools.values()], hooks, hookNames: hookNames.sort() }
}

/**
 * The Effect flavour's context: the same parts, each method giving an Effect instead of a
 * Promise (`yield* ctx.tool.transform(...)`); the unserved parts still throw `unsupported`.
 */
function effectContext(ctx, Effect) {
  const wrap = (part) => {
    if (part === null || typeof part !== "object") return part
    return new Proxy(part, {
      get(target, p) {
        const v = target[p]
        if (typeof v !== "function") return v
        return (...args) => {
          const out = v.apply(target, args)
          return out && typeof out.then === "function" ? Effect.promise(() => out) : Effect.succeed(out)
        }
      },
    })
  }
  return {
    options: ctx.options,
    location: ctx.location,
    app: ctx.app,
    storage: wrap(ctx.storage),
    tool: wrap(ctx.tool),
    event: ctx.event,
    session: ctx.session,
    ...Object.fromEntries(UNSERVED.map((part) => [part, ctx[part]])),
  }
}
