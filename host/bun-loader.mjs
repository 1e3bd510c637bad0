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
import { looksCjs, jsonModule } from "./gate.mjs"
import { SafeMap, stringify } from "./intrinsics.mjs"

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
    let target = null
    for (const dir of gate.depsOf(importer)) {
      try {
        target = Bun.resolveSync(spec, dir)
        break
      } catch {}
    }
    resolved.set(key, target)
    return target
  }
  const transpilers = {}
  const transpiler = (loader) => (transpilers[loader] ??= new Bun.Transpiler({ loader }))

  // Every path outside Berth's own folders; those inside load natively.
  const trusted = gate.trusted.map(escapeRe).join("|")
  const filter = trusted ? new RegExp(`^(?!(?:${trusted}))`) : /.*/
  Bun.plugin({
    name: "berth-gate",
    setup(build) {
      build.onLoad({ filter }, (args) => {
        const path = args.path.replace(/[?#].*$/, "")
        const text = gate.readApproved(path).toString("utf8")
        const ext = extOf(path)
        if (ext === ".json") return { contents: jsonModule(path, text), loader: "js" }
        const loader = LOADERS[ext]
        if (loader === "toml" || loader === "yaml") return { contents: text, loader }
        if (!loader) return { exports: { default: text }, loader: "object" }
        if (looksCjs(text)) {
          const js = loader === "js" ? text : transpiler(loader).transformSync(text)
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
      imports = transpiler(loader).scanImports(source)
    } catch {}
    for (const spec of new Set(imports.map((i) => i.path))) {
      if (!isBare(spec)) continue
      const target = preparedTarget(spec, path)
      if (!target) continue
      const quoted = escapeRe(spec)
      const re = new RegExp(`((?:\\bfrom|\\bimport|\\brequire\\s*\\()\\s*\\(?\\s*)(["'])${quoted}\\2`, "g")
      source = source.replace(re, (_m, pre, q) => `${pre}${q}${target}${q}`)
    }
    return source
  }
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
  return `import { cjsRequire as __berth_cjs } from ${stringify(import.meta.url)};
import __berth_vm from "node:vm";
const __berth_m = { exports: {}, id: ${P}, filename: ${P}, loaded: false, children: [], paths: [] };
const __berth_req = __berth_cjs(${P});
__berth_req.cache[${P}] = __berth_m;
__berth_vm.compileFunction(${stringify(source)}, ["exports", "require", "module", "__filename", "__dirname"], { filename: ${P} }).call(__berth_m.exports, __berth_m.exports, __berth_req, __berth_m, ${P}, ${D});
__berth_m.loaded = true;
const __berth_e = __berth_m.exports;
export { __berth_e as default, __berth_e as "module.exports" };
`
}
