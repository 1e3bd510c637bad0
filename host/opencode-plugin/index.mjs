// `@opencode/plugin` as Berth provides it to OpenCode V2 plugins at resolve time (OpenCode 2
// "provides `effect` and `@opencode/plugin` at runtime"; the seeds' commit named the same module
// `@opencode-ai/plugin/effect`'s Promise sibling). One copy per host, so every plugin's
// `Tool.Error` is the same class. Ledger D-044.
//
// Owns: `Plugin.define` (the identity, as in OpenCode) and `Tool.Error`. Must not: hold state
// of any plugin: the setup context is built per plugin by `v2.mjs`.

/** A tool's recoverable error (`Tool.Error`): rejects a call from `execute.before`, or fails
 * one from `execute`. Takes `{ message, metadata? }` as OpenCode's, or a plain message. */
export class ToolError extends Error {
  constructor(input) {
    const fields = typeof input === "string" ? { message: input } : input ?? {}
    super(String(fields.message ?? "tool error"))
    this.name = "Tool.Error"
    this._tag = "Tool.Error"
    if (fields.metadata !== undefined) this.metadata = fields.metadata
    if (fields.error !== undefined) this.cause = fields.error
  }
}

export const Tool = Object.freeze({ Error: ToolError })

export const Plugin = Object.freeze({
  /** The identity, as OpenCode's `define`: the object is the plugin. */
  define: (plugin) => plugin,
})

/** The mirror's spelling (`@opencode-ai/plugin@1.18.33` `./v2/promise`): `define(plugin)`. */
export const define = Plugin.define

export { ToolError as Error }
export default { Plugin, Tool }
