// The modules Berth provides plugins at resolve time, whatever their own dependencies hold:
// OpenCode 2 "provides `effect` and `@opencode/plugin` at runtime", so a V2 plugin's
// `@opencode/plugin` is Berth's adapter module (one copy per host, D-044). The root
// `@opencode-ai/plugin` is not here: it stays V1's package (1.18.4), which V1 plugins import
// `tool` from. Must not: name a module outside Berth's own host folder.
import { fileURLToPath } from "node:url"
import { realpathSync } from "node:fs"

const at = (file) => realpathSync(fileURLToPath(new URL(file, import.meta.url)))

// `opencode-plugin/` is a package folder (named `@opencode/plugin`) so that an npm plugin's
// install can link it in where npm would otherwise fetch it (`deps.rs`, D-044): the same files,
// one module per host whichever way a plugin reaches them.
const PROVIDED = {
  "@opencode/plugin": at("./opencode-plugin/index.mjs"),
  "@opencode/plugin/effect": at("./opencode-plugin/effect.mjs"),
  // The 1.18.33 package's early mirror of the V2 API.
  "@opencode-ai/plugin/v2/promise": at("./opencode-plugin/index.mjs"),
  "@opencode-ai/plugin/v2/effect": at("./opencode-plugin/effect.mjs"),
  // The seeds' commit named the Effect flavour so.
  "@opencode-ai/plugin/effect": at("./opencode-plugin/effect.mjs"),
}

/** The file Berth serves for `specifier`, or null when it is the plugin's own to resolve. */
export function providedModule(specifier) {
  return Object.prototype.hasOwnProperty.call(PROVIDED, specifier) ? PROVIDED[specifier] : null
}

/** Every file Berth provides: the host admits them to its load gate with the digest of the bytes
 * it found at start, like an approved source's files (they are Berth's, not a plugin's). */
export function providedFiles() {
  return [...new Set(Object.values(PROVIDED))]
}
