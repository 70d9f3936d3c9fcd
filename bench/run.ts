/**
 * `npm run bench -- <suite> [args…]`: runs bench/<suite>.ts, whose default
 * export returns the figures, and prints them as one JSON object.
 */
const [suite, ...args] = process.argv.slice(2)
if (!suite || !/^[a-z0-9-]+$/.test(suite)) {
  console.error('usage: npm run bench -- <suite>   (suites: the files in bench/)')
  process.exit(2)
}
const mod = (await import(`./${suite}.ts`)) as { default: (args: string[]) => Promise<unknown> }
const figures = await mod.default(args)
console.log(JSON.stringify({ suite, node: process.version, ...(figures as object) }, null, 2))
process.exit(0)
