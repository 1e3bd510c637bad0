// Asks the real runtime which file each case's import or require loads (tests/cli/resolve.rs).
// argv[2]: a JSON file of [{probe, spec, kind}]; `probe` is the importing file (it holds
// `run(spec, kind)`, written by the test); prints one JSON array of answers: the `loaded`
// marker of the file that ran, or "none" when nothing loads.
//
// Bun: the import or require really runs (what Bun loads is the question). Node: the
// resolution its loaders do (`import.meta.resolve`, `require.resolve`), since Node 20 cannot
// run TypeScript files itself; Berth's Node host loads the resolved file through its hooks.
import { readFileSync } from "node:fs"
import { pathToFileURL } from "node:url"

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"))
const out = []
for (const c of cases) {
  const probe = await import(pathToFileURL(c.probe).href)
  out.push(await probe.run(c.spec, c.kind))
}
process.stdout.write(JSON.stringify(out))
