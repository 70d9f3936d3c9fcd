#!/usr/bin/env node
/*
 * `npm run build` (also `prepare`, so `npm ci`, `npm install` and `npm pack`
 * run it): compiles src/ to dist/ with tsconfig.build.json, then copies every
 * file under src/ that is not TypeScript (grep-worker.cjs, …) to the same
 * place under dist/, so a path taken relative to import.meta.url resolves from
 * dist/ as it does from src/ (and `../package.json` from both).
 *
 * It builds into dist-next/ and swaps it in at the end: a file deleted from
 * src/ does not linger in dist/ (or in a packed tarball), a failed build leaves
 * the last good dist/ in place, and `chronicle` never finds dist/ half-written.
 * Plain JavaScript: it runs before anything is compiled.
 *
 * The web page (src/web/) is not compiled by tsc: scripts/build-web.mjs
 * bundles it into dist-next/web/ (index.html and assets/), the server's
 * default web root.
 */
import { execFileSync } from 'node:child_process'
import { cpSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildWeb } from './build-web.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const src = join(root, 'src')
const web = join(src, 'web')
const dist = join(root, 'dist')
const next = join(root, 'dist-next')

rmSync(next, { recursive: true, force: true })
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
try {
  // dist-next/ sits beside dist/, so the source maps' relative paths to src/ hold after the rename
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', next], { stdio: 'inherit' })
} catch {
  rmSync(next, { recursive: true, force: true })
  console.error('build: tsc failed; dist/ is unchanged')
  process.exit(1)
}
let assets = 0
for (const entry of readdirSync(src, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || entry.name.endsWith('.ts')) continue
  const file = join(entry.parentPath, entry.name)
  if (file.startsWith(`${web}/`)) continue // bundled by buildWeb below
  cpSync(file, join(next, relative(src, file)))
  assets++
}
try {
  await buildWeb({ out: join(next, 'web') })
} catch (err) {
  rmSync(next, { recursive: true, force: true })
  console.error(`build: the web page failed (${err instanceof Error ? err.message : err}); dist/ is unchanged`)
  process.exit(1)
}
rmSync(dist, { recursive: true, force: true })
renameSync(next, dist)
console.log(`build: dist/ from src/ (${assets} non-TypeScript ${assets === 1 ? 'file' : 'files'} copied)`)
