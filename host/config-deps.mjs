// Where Berth prepared the dependencies of a config folder's own package.json:
// `<data dir>/config-deps/<first 16 hex of sha256(folder path)>` (the same name as
// crates/runtime/src/deps.rs `config_deps_dir`), found from the importing file by walking up
// its folders. Shared by the Bun resolver plugin and the Node resolve hook.
//
// Must not: resolve anything itself, or look outside Berth's data dir.
import { createHash } from "node:crypto"
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"

const found = new Map() // folder -> prepared dir or null

/** The prepared folder for the nearest config folder above `importer`, or null. */
export function configDepsFor(hostDepsDir, importer) {
  if (!importer || !importer.startsWith("/")) return null
  const root = join(hostDepsDir, "..", "..", "config-deps")
  let dir = dirname(importer)
  const walked = []
  for (;;) {
    if (found.has(dir)) {
      const hit = found.get(dir)
      for (const w of walked) found.set(w, hit)
      return hit
    }
    walked.push(dir)
    const candidate = join(root, createHash("sha256").update(dir).digest("hex").slice(0, 16))
    if (existsSync(join(candidate, "node_modules"))) {
      for (const w of walked) found.set(w, candidate)
      return candidate
    }
    const up = dirname(dir)
    if (up === dir) break
    dir = up
  }
  for (const w of walked) found.set(w, null)
  return null
}
