// `@opencode/plugin/effect` (and the seeds' `@opencode-ai/plugin/effect`) as Berth provides it
// to Effect-flavoured OpenCode V2 plugins: `Plugin.define` (the identity) and `Tool.Error`, the
// same class as the Promise flavour's. The plugin's `effect` imports resolve to Berth's one
// pinned copy of `effect` (4.0.1, the version OpenCode 2 provides); `v2.mjs` runs the plugin's
// Effect in a scope of its own and closes it on unload. Ledger D-044.
//
// Owns: this module's exports. Must not: hold state of any plugin.
export { Plugin, Tool, ToolError, Error } from "./index.mjs"
export { default } from "./index.mjs"
