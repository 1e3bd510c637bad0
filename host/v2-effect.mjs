// `@opencode/plugin/effect` (and the seeds' `@opencode-ai/plugin/effect`): the Effect flavour of
// OpenCode V2 plugins is not run by Berth yet (ledger D-044). Importing it fails the plugin's
// load with a stable `unsupported` error naming the module — never a generic "cannot find
// package", and never a half-working context.
const e = new Error(
  "Berth does not run Effect-flavoured OpenCode V2 plugins yet (`@opencode/plugin/effect`); the Promise flavour (`@opencode/plugin`, `Plugin.define({ id, setup })`) runs",
)
e.berthCode = "unsupported"
throw e
