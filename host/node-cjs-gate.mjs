// On Node, `require` chains that do not pass the module hooks (`createRequire(…)(…)`, a
// CommonJS file read by Node's own loader) are gated here, on the main thread: every `.js`,
// `.cjs` and `.json` file (and any other, which Node compiles as `.js`) outside Berth's own
// folders is read once through the gate and only its approved bytes are compiled.
//
// Must not: change how files inside Berth's own folders load.
import Module from "node:module"
import { parse, uncurry } from "./intrinsics.mjs"

// Captured before any plugin code: a plugin patching `Module.prototype._compile` must not see
// or change the approved bytes on their way to the compiler.
const compile = uncurry(Module.prototype._compile)

/** Patches Node's CommonJS loader for `.js`, `.cjs` and `.json`; `gate` is the host's `Gate`. */
export function installCjsGate(gate) {
  const ext = Module._extensions
  // `.cjs` (and any other extension) falls back to the `.js` handler.
  for (const kind of [".js", ".cjs"]) {
    const native = ext[kind] ?? ext[".js"]
    ext[kind] = function (module, filename) {
      if (gate.isTrusted(filename)) return native.call(this, module, filename)
      compile(module, gate.readApprovedText(filename), filename)
    }
  }
  const nativeJson = ext[".json"]
  ext[".json"] = function (module, filename) {
    if (gate.isTrusted(filename)) return nativeJson.call(this, module, filename)
    const text = gate.readApprovedText(filename)
    try {
      module.exports = parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
    } catch (e) {
      e.message = `${filename}: ${e.message}`
      throw e
    }
  }
}
