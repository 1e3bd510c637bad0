// Node's module hooks for the plugin host: bare imports fall back to the config folder's
// prepared dependencies (config-deps.mjs), then to Berth's deps dir, and
// TypeScript files are stripped to JavaScript (Node 20 has no type stripping) with sucrase.
// The module keeps its real URL, so import.meta.url stays true.
import { createRequire } from "node:module"
import { readFile } from "node:fs/promises"
import { pathToFileURL, fileURLToPath } from "node:url"
import { configDepsFor } from "./config-deps.mjs"

let depsDir
let depsParent
let transform

export async function initialize(data) {
  depsDir = data.depsDir
  depsParent = pathToFileURL(depsDir.replace(/\/?$/, "/")).href
  const require = createRequire(depsParent + "package.json")
  transform = require("sucrase").transform
}

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (err) {
    const bare = /^[^./]/.test(specifier) && !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(specifier)
    if (!bare) throw err
    const importer = context.parentURL?.startsWith("file:") ? fileURLToPath(context.parentURL.replace(/[?#].*$/, "")) : ""
    const own = configDepsFor(depsDir, importer)
    if (own) {
      try {
        return await next(specifier, { ...context, parentURL: pathToFileURL(own + "/").href })
      } catch {}
    }
    return next(specifier, { ...context, parentURL: depsParent })
  }
}

export async function load(url, context, next) {
  const path = url.startsWith("file:") ? fileURLToPath(url.replace(/[?#].*$/, "")) : ""
  if (/\.(m|c)?tsx?$/.test(path)) {
    const source = await readFile(path, "utf8")
    const { code } = transform(source, { transforms: path.endsWith("x") ? ["typescript", "jsx"] : ["typescript"], disableESTransforms: true, filePath: path })
    return { format: "module", source: code, shortCircuit: true }
  }
  return next(url, context)
}
