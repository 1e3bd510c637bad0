// The load gate of a plugin host: what the approved manifests of the sources loaded here allow
// to run, and the check every module load outside Berth's own prepared folders passes. A file
// is read once, hashed, and its bytes are handed to the runtime only if they are exactly the
// bytes the person approved; a file no manifest lists, or whose bytes differ, never runs.
//
// Native addons (`process.dlopen`) pass the same check (`installDlopenGate`).
//
// Owns: the admitted manifests (file → digest, file → the folders its bare imports resolve
// from), the trusted roots (Berth's own prepared installs and host code, in its private data
// dir), and `readApproved` (deviations ledger D-022). Must not: decide what is approved (the supervisor sends the
// manifests it cleared), or resolve anything itself.
import { createHash } from "node:crypto"
import { readFileSync, realpathSync } from "node:fs"
import { SafeMap, objectEntries, isArray, ErrorCtor, stringify, parse, uncurry, getPrototypeOf, reflectApply, bufToString, stringIndexOf, stringSlice, stringStartsWith } from "./intrinsics.mjs"

// Captured with the rest of the host's built-ins: the gate's own reads and hashes (a plugin
// patching `Hash.prototype.digest` must not make other bytes look approved).
const readFile = readFileSync
const newHash = createHash
const Hash = getPrototypeOf(createHash("sha256"))
const hashUpdate = uncurry(Hash.update)
const hashDigest = uncurry(Hash.digest)
const sha256 = (bytes) => {
  const h = newHash("sha256")
  hashUpdate(h, bytes)
  return "sha256:" + hashDigest(h, "hex")
}

/** Marks an error as a refusal by the gate (the supervisor reports it as `action-required`). */
export const REFUSED = "berth-refused"

export class Gate {
  constructor(trusted = []) {
    /** Folders whose files load as they are: Berth's own prepared installs and host code. */
    this.trusted = trusted.map((r) => (r.endsWith("/") ? r : r + "/"))
    /** Real path → `sha256:` digest of the approved bytes. */
    this.files = new SafeMap()
    /** Real path → folders its bare imports resolve from (the source's prepared dependencies). */
    this.deps = new SafeMap()
    /**
     * Real path → where the approved bytes are kept, for a source rolled back to an earlier
     * version (Berth's content-addressed copies): the module keeps its path, its bytes come
     * from the copy — and are hashed and compared like any others.
     */
    this.kept = new SafeMap()
  }

  /** Whether `path` lies in one of Berth's own folders. */
  isTrusted(path) {
    const roots = this.trusted
    for (let i = 0; i < roots.length; i++) if (stringStartsWith(path, roots[i])) return true
    return false
  }

  /**
   * Admits one source's manifest `{files: {path: digest}, deps: [folder…], kept?: {path:
   * copy}}`. A file already
   * admitted with other bytes is a conflict: this host may hold the old module (the
   * supervisor starts a fresh host instead).
   */
  admit(manifest) {
    const files = objectEntries(manifest?.files ?? {})
    for (let i = 0; i < files.length; i++) {
      const [path, digest] = files[i]
      const known = this.files.get(path)
      if (known !== undefined && known !== digest) throw refusal(`${path} changed since this host loaded it (approved ${short(known)}, now ${short(digest)})`)
    }
    for (let i = 0; i < files.length; i++) {
      const [path, digest] = files[i]
      this.files.set(path, digest)
      if (isArray(manifest.deps)) this.deps.set(path, manifest.deps)
    }
    const kept = objectEntries(manifest?.kept ?? {})
    for (let i = 0; i < kept.length; i++) this.kept.set(kept[i][0], kept[i][1])
  }

  /** Folders a bare import in `importer` resolves from, in order (none: the runtime's own rules). */
  depsOf(importer) {
    return this.deps.get(importer) ?? []
  }

  /**
   * The bytes of `path`, read once, if they are the approved ones; otherwise a refusal naming
   * the file. Paths in trusted folders are not asked for (the caller loads them natively).
   */
  readApproved(path) {
    const want = this.files.get(path)
    if (want === undefined) throw refusal(`${path} is not part of what was approved: Berth never showed it to you, so it does not run (a file that a source loads must be found by the scan; packages load only from what Berth prepared)`)
    const bytes = readFile(this.kept.get(path) ?? path)
    const got = sha256(bytes)
    if (got !== want) throw refusal(`${path} changed since it was approved (approved ${short(want)}, now ${short(got)}); nothing of the new bytes ran`)
    return bytes
  }

  /** `readApproved` as text, decoded by the captured `Buffer.prototype.toString`. */
  readApprovedText(path) {
    return bufToString(this.readApproved(path), "utf8")
  }
}

/**
 * Native addons go through the gate too: `process.dlopen` (what `require("x.node")` calls on
 * both runtimes, and what a plugin may call itself) loads a file outside Berth's own folders
 * only if an admitted manifest lists its exact bytes. The check reads the file by its real
 * path and the runtime then opens that path itself (a loader cannot hand it bytes): a process
 * of the same user swapping the file in between is not caught here. Fixed on `process` so no
 * plugin can put the original back.
 */
export function installDlopenGate(gate) {
  const native = process.dlopen
  const realpath = realpathSync
  if (typeof native !== "function") return
  Object.defineProperty(process, "dlopen", {
    configurable: false,
    writable: false,
    enumerable: true,
    value: function dlopen(module, filename, flags) {
      const real = realpath(String(filename))
      if (!gate.isTrusted(real)) gate.readApproved(real)
      return reflectApply(native, process, flags === undefined ? [module, real] : [module, real, flags])
    },
  })
}

/** A module path without its `?query` or `#hash` (by index: no patchable RegExp method). */
export function stripQuery(p) {
  const q = stringIndexOf(p, "?")
  const h = stringIndexOf(p, "#")
  const cut = q < 0 ? h : h < 0 ? q : q < h ? q : h
  return cut < 0 ? p : stringSlice(p, 0, cut)
}

function short(d) {
  return String(d).replace(/^sha256:/, "").slice(0, 12)
}

function refusal(message) {
  const e = new ErrorCtor(`${REFUSED}: ${message}`)
  e.berthCode = "action-required"
  return e
}

/** Whether an error (or anything thrown through a runtime's loader) is a gate refusal. */
export function isRefusal(e) {
  return e?.berthCode === "action-required" || String(e?.message ?? e).includes(`${REFUSED}:`)
}

/** The refusal's own words (without the marker), for the person. */
export function refusalMessage(e) {
  const m = String(e?.message ?? e)
  const i = m.indexOf(`${REFUSED}: `)
  return i >= 0 ? m.slice(i + REFUSED.length + 2) : m
}

// ---- module formats the gate hands over ------------------------------------------------------

/** Whether source text is an ES module by its syntax (what Bun and Node decide by, too). */
export function looksEsm(text) {
  return /^\s*(import\s*[\w{*"'(]|export\s|export\{)/m.test(text) || /\bimport\.meta\b/.test(text)
}

/** Whether source text uses CommonJS (and no ESM syntax). */
export function looksCjs(text) {
  return !looksEsm(text) && /\b(module\.exports|exports\.|exports\[|require\s*\(|__dirname|__filename)/.test(text)
}

/** A JSON file as an ES module whose default (and CommonJS `module.exports`) is the value. */
export function jsonModule(path, text) {
  try {
    parse(text)
  } catch (e) {
    throw new SyntaxError(`${path} is not valid JSON: ${e.message}`)
  }
  return `const __berth_json = JSON.parse(${stringify(text)});\nexport { __berth_json as default, __berth_json as "module.exports" };\n`
}
