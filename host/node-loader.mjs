// Node's module hooks for the plugin host (they run on Node's loader thread): every module
// loaded outside Berth's own folders is read once through the gate and only its approved bytes
// are handed to Node — ES modules, CommonJS loaded through the ESM loader (its own `require`
// calls come back here), JSON; TypeScript is stripped from the approved bytes with sucrase
// (Node 20 has no type stripping). Bare imports of those files resolve in the packages Berth
// prepared for the source first (D-022, D-023). The module keeps its real URL, so `import.meta.url` stays true.
//
// The main thread admits each manifest here (a message, acknowledged) before it imports
// anything of the source: the hooks never wait on the main thread, which Node may block while
// a `require` is served. `require` chains that skip these hooks (`createRequire`) are gated on
// the main thread (`node-cjs-gate.mjs`).
//
// Must not: let a file through that the gate did not admit, or read a file twice.
import { createRequire } from "node:module"
import { pathToFileURL, fileURLToPath } from "node:url"
import { Gate, looksEsm, jsonModule } from "./gate.mjs"
import { providedModule } from "./provided.mjs"

let gate = new Gate()
let transform

export async function initialize({ depsDir, trusted, provided, port, self }) {
  gate = new Gate(trusted)
  gate.admit(provided)
  gate.deps.set(self, [depsDir])
  const require = createRequire(pathToFileURL(depsDir.replace(/\/?$/, "/")).href + "package.json")
  transform = require("sucrase").transform
  port.on("message", (msg) => {
    try {
      gate.admit(msg.manifest)
      port.postMessage({ ack: msg.id })
    } catch (e) {
      port.postMessage({ ack: msg.id, error: String(e?.message ?? e) })
    }
  })
  port.unref()
}

const isBare = (spec) => /^[^./]/.test(spec) && !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(spec)
const pathOf = (url) => (url?.startsWith("file:") ? fileURLToPath(url.replace(/[?#].*$/, "")) : "")

export async function resolve(specifier, context, next) {
  const importer = pathOf(context.parentURL)
  if (isBare(specifier) && importer && !gate.isTrusted(importer)) {
    const provided = providedModule(specifier)
    if (provided) return { url: pathToFileURL(provided).href, format: "module", shortCircuit: true }
    for (const dir of gate.depsOf(importer)) {
      try {
        return await next(specifier, { ...context, parentURL: pathToFileURL(dir.replace(/\/?$/, "/")).href })
      } catch {}
    }
  }
  return next(specifier, context)
}

export async function load(url, context, next) {
  const path = pathOf(url)
  if (!path || gate.isTrusted(path)) return next(url, context)
  const text = gate.readApproved(path).toString("utf8")
  if (/\.json$/i.test(path)) {
    jsonModule(path, text) // refuses text that is not JSON
    return { format: "json", source: text, shortCircuit: true }
  }
  if (/\.(m|c)?tsx?$/.test(path)) {
    const { code } = transform(text, { transforms: path.endsWith("x") ? ["typescript", "jsx"] : ["typescript"], disableESTransforms: true, filePath: path })
    return { format: /\.cts$/.test(path) ? "commonjs" : "module", source: code, shortCircuit: true }
  }
  const format = /\.mjs$/.test(path) ? "module" : /\.cjs$/.test(path) ? "commonjs" : context.format ?? (looksEsm(text) ? "module" : "commonjs")
  return { format, source: text, shortCircuit: true }
}
