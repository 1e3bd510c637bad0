#!/usr/bin/env node
// A fake OpenAI-compatible chat model for oracle recordings (after the oracle notes on running OpenCode headless against a mock model).
// Binds 127.0.0.1 only and stops by itself after MOCK_MAX_SECONDS (default 300) or MOCK_MAX_REQUESTS
// (default 200), or, with --exit-on-stdin-close, when its stdin closes (give it a pipe from the parent so
// it dies with the parent).
//
// Protocol (POST /v1/chat/completions, streamed or not):
// * a request without `tools` (OpenCode's title generator) gets the text "Oracle session";
// * if `tool` role messages follow the last user message, the answer is the text
//   `ORACLE_DONE <tool outputs joined by " | ">`, finish_reason "stop";
// * otherwise every line `CALL <tool> <json args>` of the last user message (all its text parts) becomes one
//   tool call (ids call_oracle_1, call_oracle_2, ... counted over the mock's lifetime), finish_reason "tool_calls";
// * no CALL line: the text "ORACLE_NOCALL".
// Every request is appended to MOCK_LOG (JSON lines: {n, method, url, headers, body}).
//
// Usage: node mock-model.cjs [--port N (0 = any)] [--port-file FILE] [--exit-on-stdin-close]
"use strict"

const fs = require("node:fs")
const http = require("node:http")

const argv = process.argv.slice(2)
const arg = (name, dflt) => {
  const i = argv.indexOf(name)
  return i >= 0 ? argv[i + 1] : dflt
}
const PORT = Number(arg("--port", "0"))
const PORT_FILE = arg("--port-file")
const LOG = process.env.MOCK_LOG
const MAX_SECONDS = Number(process.env.MOCK_MAX_SECONDS || 300)
const MAX_REQUESTS = Number(process.env.MOCK_MAX_REQUESTS || 200)

let requests = 0
let callCounter = 0

function textOf(content) {
  if (typeof content === "string") return content
  if (Array.isArray(content)) return content.map((p) => (p && typeof p.text === "string" ? p.text : "")).join("\n")
  return ""
}

// `opencode run` passes the prompt as a JSON string literal; un-quote it.
function unquote(s) {
  const t = s.trim()
  if (t.startsWith('"') && t.endsWith('"')) {
    try {
      const v = JSON.parse(t)
      if (typeof v === "string") return v
    } catch {}
  }
  return s
}

function decide(body) {
  const messages = Array.isArray(body.messages) ? body.messages : []
  if (!Array.isArray(body.tools) || body.tools.length === 0) return { text: "Oracle session" }
  let lastUser = -1
  messages.forEach((m, i) => {
    if (m.role === "user") lastUser = i
  })
  const after = messages.slice(lastUser + 1)
  const toolMsgs = after.filter((m) => m.role === "tool")
  if (toolMsgs.length) return { text: `ORACLE_DONE ${toolMsgs.map((m) => textOf(m.content)).join(" | ")}` }
  const userText = lastUser >= 0 ? unquote(textOf(messages[lastUser].content)) : ""
  const calls = []
  for (const line of userText.split("\n")) {
    const m = /^\s*CALL\s+(\S+)\s*(.*)$/.exec(line)
    if (!m) continue
    const args = m[2].trim() || "{}"
    calls.push({ id: `call_oracle_${++callCounter}`, name: m[1], arguments: args })
  }
  if (calls.length) return { calls }
  return { text: "ORACLE_NOCALL" }
}

const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }

function chunk(model, delta, finish) {
  return {
    id: "chatcmpl-oracle",
    object: "chat.completion.chunk",
    created: 0,
    model,
    choices: [{ index: 0, delta, finish_reason: finish ?? null }],
  }
}

function respond(res, body, answer) {
  const model = body.model || "mock-model"
  if (body.stream) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "close" })
    const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`)
    if (answer.calls) {
      send(chunk(model, { role: "assistant", content: null }))
      answer.calls.forEach((c, index) => {
        send(chunk(model, { tool_calls: [{ index, id: c.id, type: "function", function: { name: c.name, arguments: "" } }] }))
        send(chunk(model, { tool_calls: [{ index, function: { arguments: c.arguments } }] }))
      })
      send(chunk(model, {}, "tool_calls"))
    } else {
      send(chunk(model, { role: "assistant", content: "" }))
      send(chunk(model, { content: answer.text }))
      send(chunk(model, {}, "stop"))
    }
    send({ id: "chatcmpl-oracle", object: "chat.completion.chunk", created: 0, model, choices: [], usage })
    res.end("data: [DONE]\n\n")
    return
  }
  const message = answer.calls
    ? {
        role: "assistant",
        content: null,
        tool_calls: answer.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })),
      }
    : { role: "assistant", content: answer.text }
  res.writeHead(200, { "content-type": "application/json" })
  res.end(
    JSON.stringify({
      id: "chatcmpl-oracle",
      object: "chat.completion",
      created: 0,
      model,
      choices: [{ index: 0, message, finish_reason: answer.calls ? "tool_calls" : "stop" }],
      usage,
    }),
  )
}

const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    const n = ++requests
    const raw = Buffer.concat(chunks).toString("utf8")
    let body = {}
    try {
      body = raw ? JSON.parse(raw) : {}
    } catch {}
    if (LOG) fs.appendFileSync(LOG, JSON.stringify({ n, method: req.method, url: req.url, headers: req.headers, body }) + "\n")
    if (req.method === "POST" && /\/chat\/completions$/.test(req.url.split("?")[0])) respond(res, body, decide(body))
    else if (req.method === "GET" && /\/models$/.test(req.url.split("?")[0])) {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ object: "list", data: [{ id: "mock-model", object: "model", owned_by: "oracle" }] }))
    } else {
      res.writeHead(404, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: `mock: no route ${req.method} ${req.url}` } }))
    }
    if (n >= MAX_REQUESTS) setTimeout(() => process.exit(0), 200)
  })
})

server.listen(PORT, "127.0.0.1", () => {
  const port = server.address().port
  if (PORT_FILE) {
    fs.writeFileSync(`${PORT_FILE}.tmp`, String(port))
    fs.renameSync(`${PORT_FILE}.tmp`, PORT_FILE) // appears complete or not at all
  }
  process.stdout.write(`mock-model listening on 127.0.0.1:${port}\n`)
})
setTimeout(() => process.exit(0), MAX_SECONDS * 1000).unref()
if (argv.includes("--exit-on-stdin-close")) {
  process.stdin.on("end", () => process.exit(0))
  process.stdin.on("error", () => process.exit(0))
  process.stdin.resume()
}
