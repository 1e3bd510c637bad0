// Turns the raw material of one scripts/oracle/record-hooks run (hook log, mock requests, HTTP answers)
// into the machine-independent tests/oracle/hooks/chains.json. See fixtures/hooks/README.md for the format.
"use strict"

const lib = require("./discovery.cjs")

const PLUGIN_IDS = ["p1", "p2", "p3"]
// Request headers that only describe the transport (they vary with body size or connection reuse).
const TRANSPORT_HEADERS = new Set(["host", "content-length", "connection", "accept-encoding"])

const walk = (v, fn, key) => {
  if (Array.isArray(v)) return v.map((x) => walk(x, fn))
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, fn, k)]))
  return fn(v, key)
}

/**
 * Machine- and run-independent placeholders:
 * paths -> <case>/<tmp>/<repo>; ports -> <port>/<mock-port>; ses_/msg_/prt_ ids -> <session>, <message:N>,
 * <part:N> numbered by first appearance (a part id with a plugin suffix, e.g. <id>p1, keeps the suffix);
 * epoch-millisecond numbers -> "<time>"; git snapshot hashes -> "<snapshot>".
 */
function normalise(value, c, { serverPort, mockPort }) {
  let v = lib.placeholders(value, c)
  const ports = (s) =>
    s.split(`127.0.0.1:${mockPort}`).join("127.0.0.1:<mock-port>").split(`127.0.0.1:${serverPort}`).join("127.0.0.1:<port>")
  v = walk(v, (x) => (typeof x === "string" ? ports(x) : x))

  const ID = /\b(ses|msg|prt)_[0-9A-Za-z]+/g
  const seen = []
  walk(v, (x) => {
    if (typeof x === "string") for (const m of x.matchAll(ID)) if (!seen.includes(m[0])) seen.push(m[0])
    return x
  })
  const all = new Set(seen)
  const map = new Map()
  const counters = { ses: 0, msg: 0, prt: 0 }
  const kindName = { ses: "session", msg: "message", prt: "part" }
  const sessions = seen.filter((s) => s.startsWith("ses_")).length
  for (const id of seen) {
    const m = /^(.*)(p[1-3])$/.exec(id)
    if (m && all.has(m[1])) continue // derived id, mapped from its base below
    const kind = id.slice(0, 3)
    const n = ++counters[kind]
    map.set(id, kind === "ses" && sessions === 1 ? "<session>" : `<${kindName[kind]}:${n}>`)
  }
  for (const id of seen) {
    const m = /^(.*)(p[1-3])$/.exec(id)
    if (!map.has(id) && m && map.has(m[1])) map.set(id, map.get(m[1]).replace(/>$/, `${m[2]}>`))
  }
  return walk(v, (x, key) => {
    if (typeof x === "string") {
      if (key === "snapshot" && /^[0-9a-f]{40}$/.test(x)) return "<snapshot>"
      return x.replace(ID, (id) => map.get(id) ?? id)
    }
    if (typeof x === "number" && Number.isInteger(x) && x > 1e12 && x < 1e14) return "<time>"
    return x
  })
}

function requestSummary(r) {
  const body = r.body ?? {}
  const headers = Object.fromEntries(
    Object.entries(r.headers ?? {})
      .filter(([k]) => !TRANSPORT_HEADERS.has(k))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  )
  const out = { kind: Array.isArray(body.tools) && body.tools.length ? "agent step (has tools)" : "title (no tools)", headers }
  const b = {}
  for (const [k, x] of Object.entries(body)) {
    if (k === "messages")
      b.messages = x.map((m) => (m.role === "system" ? { role: "system", content: "<system prompt, not recorded>" } : m))
    else if (k === "tools") b.tools = x.map((t) => t.function?.name ?? t.name)
    else b[k] = x
  }
  out.body = b
  return out
}

// Consecutive calls of one hook (same agent / tool) folded into one entry: which plugins, in which order.
function hookOrder(calls) {
  const out = []
  for (const h of calls) {
    const key = { hook: h.hook }
    if (h.input?.agent !== undefined && h.hook.startsWith("chat.")) key.agent = h.input.agent
    if (h.input?.tool !== undefined) key.tool = h.input.tool
    const last = out[out.length - 1]
    if (last && JSON.stringify({ ...last, plugins: undefined }) === JSON.stringify({ ...key, plugins: undefined }) && h.plugin)
      last.plugins.push(h.plugin)
    else out.push({ ...key, plugins: h.plugin ? [h.plugin] : [] })
  }
  return out
}

function eventSummary(events) {
  // Every bus event should reach p1, p2, p3 in that order, one right after the other.
  let inOrder = events.length % PLUGIN_IDS.length === 0
  for (let i = 0; inOrder && i < events.length; i += PLUGIN_IDS.length)
    inOrder = PLUGIN_IDS.every((p, j) => events[i + j].plugin === p && events[i + j].type === events[i].type)
  return {
    note:
      "event hooks are not awaited and interleave with the other hooks; their exact sequence and counts vary between runs " +
      "(e.g. a trailing message.updated), so only the set of types and the per-event plugin order are recorded.",
    each_event_reaches_p1_p2_p3_in_order: inOrder,
    every_event_has_id: events.every((e) => e.has_id),
    types: [...new Set(events.map((e) => e.type))].sort(),
  }
}

function buildRecording(raw, c, meta) {
  const hooks = raw.hooks
  const calls = hooks.filter((h) => h.hook !== "event")
  const events = hooks.filter((h) => h.hook === "event")
  const toolParts = raw.messages.flatMap((m) => m.parts).filter((p) => p.type === "tool")
  const toolPart = toolParts.find((p) => p.tool === "oracle_echo")
  const userMsg = raw.messages.find((m) => m.info.role === "user")
  const requests = raw.requests.map(requestSummary)
  const agentSteps = requests.filter((r) => r.body.tools)
  const execLog = calls.filter((h) => h.hook === "(oracle_echo.execute)")
  const lastText = raw.messages
    .filter((m) => m.info.role === "assistant")
    .flatMap((m) => m.parts)
    .filter((p) => p.type === "text")
    .map((p) => p.text)
  const pick = (o, keys) => Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]))
  const paramsOf = (r) => pick(r.body, ["temperature", "top_p", "top_k", "max_tokens", "trail"])
  const berthHeaders = (r) => Object.fromEntries(Object.entries(r.headers).filter(([k]) => k.startsWith("x-berth-")))

  const execArgs = execLog.map((h) => h.args)
  const storedTexts = userMsg ? userMsg.parts.map((p) => p.text) : []
  const findings = {
    hook_plugin_order_always_p1_p2_p3: hookOrder(calls).every((g) => g.hook.startsWith("(") || g.plugins.join() === PLUGIN_IDS.join()),
    "tool.execute.before: tool ran with": execArgs,
    "tool.execute.before: args replacement by p2 ignored (and p3's mutation of p2's object lost)":
      execArgs.length > 0 && execArgs.every((a) => a.text === "hi-p1"),
    "chat.message: parts reassignment by p2 ignored (and p3's push onto p2's array lost)":
      storedTexts.includes("[pushed by p1]") && !storedTexts.includes("[reassigned by p2]") && !storedTexts.includes("[pushed by p3]"),
    "chat.params: topK set by p2 reached the model request": requests.some((r) => "top_k" in r.body),
    "chat.params: unknown options key (trail) sent as a top-level body field": requests.every((r) => Array.isArray(r.body.trail)),
    "chat.params/chat.headers calls per prompt (title + agent steps)": {
      "chat.params": calls.filter((h) => h.hook === "chat.params").length / PLUGIN_IDS.length,
      "chat.headers": calls.filter((h) => h.hook === "chat.headers").length / PLUGIN_IDS.length,
      model_requests: requests.length,
    },
  }

  const rec = {
    about:
      "How the real OpenCode 1.18.4 chains hooks over three file plugins (fixtures/hooks/project/.opencode/lib/hook-p{1,2,3}.ts, " +
      "listed in that order in opencode.json) for one prompt with one tool call. Re-record with scripts/oracle/record-hooks; " +
      "format in fixtures/hooks/README.md.",
    opencode_version: raw.version,
    command:
      `${raw.command}; GET /experimental/tool/ids; POST /session; POST /session/<session>/message ` +
      JSON.stringify({ model: meta.model, agent: meta.agent, parts: [{ type: "text", text: meta.prompt }] }),
    prompt: meta.prompt,
    plugin_order: raw.config.plugin,
    plugin_ids: { p1: "berth-hook-p1", p2: "berth-hook-p2", p3: "berth-hook-p3" },
    findings,
    hook_order: hookOrder(calls),
    calls,
    events: eventSummary(events),
    tool_result: toolPart
      ? { tool: toolPart.tool, callID: toolPart.callID, ...pick(toolPart.state, ["status", "input", "output", "title", "metadata"]) }
      : null,
    observed: {
      "chat.message": {
        stored_user_parts: userMsg ? userMsg.parts.map((p) => pick(p, ["id", "type", "text"])) : null,
        model_user_content: agentSteps.length
          ? agentSteps[0].body.messages.filter((m) => m.role === "user").map((m) => m.content)
          : null,
      },
      "chat.params": requests.map((r) => ({ kind: r.kind, ...paramsOf(r) })),
      "chat.headers": requests.map((r) => ({ kind: r.kind, ...berthHeaders(r) })),
      "tool.execute.before": {
        tool_executed_with: execLog.map((h) => h.args),
        tool_part_input: toolPart?.state?.input ?? null,
        model_history_tool_call_arguments: agentSteps
          .flatMap((r) => r.body.messages)
          .filter((m) => m.role === "assistant" && m.tool_calls)
          .flatMap((m) => m.tool_calls.map((t) => t.function.arguments)),
      },
      "tool.execute.after": {
        stored: toolPart ? pick(toolPart.state, ["output", "title", "metadata"]) : null,
        model_saw_tool_result: agentSteps
          .flatMap((r) => r.body.messages)
          .filter((m) => m.role === "tool")
          .map((m) => m.content),
      },
      config: {
        berth_commands: raw.commands
          .filter((x) => x.name.startsWith("berth-"))
          .map((x) => pick(x, ["name", "description", "template"])),
      },
      final_assistant_text: lastText,
    },
    model_requests: requests,
  }
  return normalise(rec, c, { serverPort: raw.serverPort, mockPort: raw.mockPort })
}

module.exports = { buildRecording, normalise }
