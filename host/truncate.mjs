// OpenCode 1.18.4's truncation of a tool's output (its `Truncate.output`), applied where
// OpenCode applies it: to the tool's own result, before `tool.execute.after` hooks see it.
// Owns: the limits (2,000 lines / 50 KiB, head first), the notice text, and writing the full
// text of an output over the frame budget to the file Berth named. Must not: choose where the
// full text is kept (the runtime names the file) or read anything back.
//
// Built-ins are the host's captured ones (intrinsics.mjs): plugin code may have replaced
// `String.prototype.split` by the time a tool returns.

import { writeFileSync } from "node:fs"
import { arrayJoin, arrayPush, bufferByteLength, stringSplit } from "./intrinsics.mjs"

const notice = (path) =>
  `The tool call succeeded but the output was truncated. Full output saved to: ${path}\n` +
  "Use the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context."

/**
 * `output` as OpenCode gives it to the model: whole when within `maxLines` and `maxBytes`,
 * else its head with OpenCode's notice naming `path` (where the full text is kept).
 * Returns { content, truncated }.
 */
export function truncateOutput(output, { path, maxLines, maxBytes }) {
  const lines = stringSplit(output, "\n")
  const total = bufferByteLength(output, "utf-8")
  if (lines.length <= maxLines && total <= maxBytes) return { content: output, truncated: false }
  const kept = []
  let bytes = 0
  let hitBytes = false
  for (let i = 0; i < lines.length && i < maxLines; i++) {
    const size = bufferByteLength(lines[i], "utf-8") + (i > 0 ? 1 : 0)
    if (bytes + size > maxBytes) {
      hitBytes = true
      break
    }
    arrayPush(kept, lines[i])
    bytes += size
  }
  const removed = hitBytes ? total - bytes : lines.length - kept.length
  const unit = hitBytes ? "bytes" : "lines"
  return { content: `${arrayJoin(kept, "\n")}\n\n...${removed} ${unit} truncated...\n\n${notice(path)}`, truncated: true }
}

/**
 * A tool's normalised result with OpenCode's truncation: `metadata.truncated` always (and
 * `outputPath` when truncated); the full text travels back as `full` when it fits the frame
 * budget (`maxFrameOutput`), else is written to `spill` first (refused over `keepMax`).
 * `fail(code, message)` makes the host's error.
 */
export function truncateResult(result, spec, maxFrameOutput, fail) {
  const size = bufferByteLength(result.output, "utf-8")
  if (size > spec.keepMax) throw fail("invalid-response", `the tool's output is ${size} bytes, over the ${spec.keepMax}-byte limit of what Berth keeps`)
  const { content, truncated } = truncateOutput(result.output, spec)
  const metadata = { ...result.metadata, truncated, ...(truncated ? { outputPath: spec.path } : {}) }
  if (!truncated) return { ...result, metadata }
  if (size <= maxFrameOutput) return { ...result, output: content, metadata, full: result.output }
  writeFileSync(spec.spill, result.output, { mode: 0o600, flag: "wx" })
  return { ...result, output: content, metadata, spilled: spec.spill }
}
