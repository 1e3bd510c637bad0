// The plugin host's module loader on Bun: a runtime plugin whose `onLoad` sees every file Bun
// loads outside Berth's own folders (static and dynamic imports, `require`, `createRequire`,
// `import.meta.require`, JSON), reads it once through the gate and hands Bun exactly the
// approved bytes. Bare imports of those files are rewritten to the packages Berth prepared for
// the source (Bun does not ask runtime plugins to resolve static imports, and `--no-install`
// keeps it from downloading what is missing; D-023).
//
// Owns: turning approved bytes into what Bun can run (ESM as is, JSON and CommonJS through
// small wrappers, because Bun ignores CommonJS contents returned by a plugin; D-027). Must not: let a
// file through that the gate did not admit, or read a file twice.
import { createRequire, isBuiltin } from "node:module"
import vm from "node:vm"
import { looksCjs, jsonModule, stripQuery } from "./gate.mjs"
import { providedModule } from "./provided.mjs"
import { SafeMap, SafeSet, stringify, reflectApply, uncurry, stringIndexOf, stringSlice } from "./intrinsics.mjs"

// Bun's resolver and transpiler, captured: what they return decides which bytes run.
const resolveSync = Bun.resolveSync
const Transpiler = Bun.Transpiler
const scanImports = uncurry(Transpiler.prototype.scanImports)
const transformSync = uncurry(Transpiler.prototype.transformSync)

// The CommonJS wrapper's compiler, captured: `node:vm`'s exports are one object a plugin can
// write to, and the approved bytes must reach the real `compileFunction`.
const compileFunction = vm.compileFunction

/**
 * Compiles `source` (approved CommonJS bytes) as a CommonJS function and runs it (imported by
 * the wrappers below; nothing of it is on `globalThis`).
 */
export function cjsRun(source, path, module, require, dirname) {
  const fn = compileFunction(source, ["exports", "require", "module", "__filename", "__dirname"], { filename: path })
  reflectApply(fn, module.exports, [module.exports, require, module, path, dirname])
}

const LOADERS = { ".ts": "ts", ".mts": "ts", ".cts": "ts", ".tsx": "tsx", ".jsx": "jsx", ".js": "js", ".mjs": "js", ".cjs": "js", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml" }

const extOf = (p) => {
  const slash = p.lastIndexOf("/")
  const dot = p.lastIndexOf(".")
  return dot > slash ? p.slice(dot).toLowerCase() : ""
}
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
const isBare = (spec) => /^[^./]/.test(spec) && !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(spec) && spec !== "bun" && !isBuiltin(spec)

let preparedTarget = () => null

/**
 * The `require` a CommonJS file outside Berth's folders gets: Bun's own for `path`, with bare
 * names resolved in the source's prepared dependencies first. Imported by the wrappers below
 * (this module is Berth's own, loaded once; nothing of it is on `globalThis`).
 */
export function cjsRequire(path) {
  const native = createRequire(path)
  const req = (spec) => native((typeof spec === "string" && isBare(spec) && preparedTarget(spec, path)) || spec)
  return Object.assign(req, { resolve: native.resolve, cache: native.cache, main: native.main })
}

/** Installs the loader; `gate` is the host's `Gate`. */
export function installBunLoader(gate) {
  const resolved = new SafeMap() // `${importer}\0${spec}` → prepared path, or null
  /** A bare specifier of `importer`, resolved in the source's prepared dependencies; null if none has it. */
  preparedTarget = (spec, importer) => {
    const key = `${importer}\0${spec}`
    if (resolved.has(key)) return resolved.get(key)
    let target = providedModule(spec)
    const dirs = gate.depsOf(importer)
    for (let i = 0; i < dirs.length && target === null; i++) {
      try {
        target = resolveSync(spec, dirs[i])
      } catch {}
    }
    resolved.set(key, target)
    return target
  }
  const transpilers = new SafeMap()
  const transpiler = (loader) => {
    if (!transpilers.has(loader)) transpilers.set(loader, new Transpiler({ loader }))
    return transpilers.get(loader)
  }

  // Every path outside Berth's own folders; those inside load natively.
  const trusted = gate.trusted.map(escapeRe).join("|")
  const filter = trusted ? new RegExp(`^(?!(?:${trusted}))`) : /.*/
  Bun.plugin({
    name: "berth-gate",
    setup(build) {
      build.onLoad({ filter }, (args) => {
        const path = stripQuery(args.path)
        const text = gate.readApprovedText(path)
        const ext = extOf(path)
        if (ext === ".json") return { contents: jsonModule(path, text), loader: "js" }
        const loader = LOADERS[ext]
        if (loader === "toml" || loader === "yaml") return { contents: text, loader }
        if (!loader) return { exports: { default: text }, loader: "object" }
        if (looksCjs(text)) {
          const js = loader === "js" ? text : transformSync(transpiler(loader), text)
          return { contents: commonJsModule(path, js), loader: "js" }
        }
        return { contents: rewriteBareImports(text, path, loader), loader }
      })
    },
  })

  /** The file's bare imports point at the prepared copies (the module keeps its real path). */
  function rewriteBareImports(source, path, loader) {
    let imports = []
    try {
      imports = scanImports(transpiler(loader), source)
    } catch {}
    const done = new SafeSet()
    for (let i = 0; i < imports.length; i++) {
      const spec = imports[i].path
      if (typeof spec !== "string" || done.has(spec) || !isBare(spec)) continue
      done.add(spec)
      const target = preparedTarget(spec, path)
      if (target) source = replaceSpecifier(source, spec, target)
    }
    return source
  }
}

const isWordChar = (c) => (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c === "_" || c === "$"
const isSpace = (c) => c === " " || c === "\t" || c === "\n" || c === "\r"

/**
 * `source` with every `from "spec"`, `import "spec"`, `import("spec")` and `require("spec")`
 * (either quote, any spacing) naming `target` instead. By index and captured methods only: the
 * approved bytes pass through no RegExp or String method a plugin could have patched.
 */
function replaceSpecifier(source, spec, target) {
  let out = ""
  let copied = 0
  let at = stringIndexOf(source, spec, 0)
  while (at >= 0) {
    const end = at + spec.length
    const q = source[at - 1]
    if ((q === '"' || q === "'") && source[end] === q && introducesSpecifier(source, at - 1)) {
      out += stringSlice(source, copied, at) + target
      copied = end
    }
    at = stringIndexOf(source, spec, end)
  }
  return copied === 0 ? source : out + stringSlice(source, copied)
}

/** Whether the quote at `quote` follows `from`, `import`, `import(` or `require(` (spaces allowed). */
function introducesSpecifier(source, quote) {
  let i = quote - 1
  while (i >= 0 && isSpace(source[i])) i--
  let paren = false
  if (source[i] === "(") {
    paren = true
    i--
    while (i >= 0 && isSpace(source[i])) i--
  }
  const end = i + 1
  while (i >= 0 && isWordChar(source[i])) i--
  const word = stringSlice(source, i + 1, end)
  return word === "import" || (word === "from" && !paren) || (word === "require" && paren)
}

/**
 * CommonJS bytes as an ES module Bun runs: the exact source compiled as a CommonJS function
 * (its own `require` goes back through this loader; bare names resolve in the prepared
 * dependencies first), `module.exports` as the default export and under Bun's
 * `"module.exports"` name, so `require()` of it returns the value itself.
 */
function commonJsModule(path, source) {
  const P = stringify(path)
  const D = stringify(path.slice(0, path.lastIndexOf("/")) || "/")
  return `import { cjsRequire as __berth_cjs, cjsRun as __berth_run } from ${stringify(import.meta.url)};
const __berth_m = { exports: {}, id: ${P}, filename: ${P}, loaded: false, children: [], paths: [] };
const __berth_req = __berth_cjs(${P});
__berth_req.cache[${P}] = __berth_m;
__berth_run(${stringify(source)}, ${P}, __berth_m, __berth_req, ${D});
__berth_m.loaded = true;
const __berth_e = __berth_m.exports;
export { __berth_e as default, __berth_e as "module.exports" };
`
}
