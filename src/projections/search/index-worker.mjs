/*
 * The search indexer's thread (src/projections/search/index-worker.ts). A
 * worker does not inherit the loader that runs the TypeScript sources, so
 * this plain module starts it: the compiled file where there is one (the
 * built package, dist/), else the source through tsx (the tests, `npm run
 * bench`, tsx src/cli.ts), whose loader it registers for this thread only.
 */
import { existsSync } from 'node:fs'

const compiled = new URL('./index-worker.js', import.meta.url)
if (existsSync(compiled)) await import(compiled.href)
else {
  const { register } = await import('tsx/esm/api')
  register()
  await import(new URL('./index-worker.ts', import.meta.url).href)
}
