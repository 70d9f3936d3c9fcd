#!/usr/bin/env node
/**
 * Regenerates test/fixtures/stores/: for each schema version the project shipped, a store written by the code
 * of the commit that introduced it (docs/UPGRADES.md). Each commit is checked out into a temporary git worktree,
 * runs scripts/store-fixtures/driver.mjs with its own code (node_modules shared by symlink, or `npm ci` there
 * when that fails), and leaves store.db (gzipped) and expected.json here.
 *
 *   node scripts/make-store-fixtures.mjs            every version
 *   node scripts/make-store-fixtures.mjs 1 14       those versions only
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { gzipSync } from 'node:zlib'

/**
 * Schema version → the commit that shipped it: the first commit whose src/events/schema.ts lists that many
 * migrations (`git log -- src/events/schema.ts`). Version 2 never shipped alone: c56f730 added 2 and 3. A new
 * migration's entry names the commit that adds it, once that commit exists (15: ba09834, on the upgrade39 branch).
 */
export const SHIPPED = [
  { version: 1, rev: 'acb1f72' },
  { version: 3, rev: 'c56f730' },
  { version: 4, rev: '71c2179' },
  { version: 5, rev: '462955e' },
  { version: 6, rev: '74d6b71' },
  { version: 7, rev: '076a705' },
  { version: 8, rev: '68bcf72' },
  { version: 9, rev: '2827e7e' },
  { version: 10, rev: '6c1dc2e' },
  { version: 11, rev: 'e782787' },
  { version: 12, rev: '4032101' },
  { version: 13, rev: '78c64d3' },
  { version: 14, rev: 'aaff940' },
  { version: 15, rev: 'ba09834' },
  { version: 16, rev: 'bb42733' },
]

const repo = resolve(import.meta.dirname, '..')
const fixtures = join(repo, 'test/fixtures/stores')
const git = (...args) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim()

function generate({ version, rev }) {
  const checkout = `/tmp/fx-${rev}`
  if (existsSync(checkout)) git('worktree', 'remove', '--force', checkout)
  git('worktree', 'add', '--detach', checkout, rev)
  const out = mkdtempSync(join(tmpdir(), `fx-out-${rev}-`))
  try {
    mkdirSync(join(checkout, '.fixture-driver'))
    for (const f of ['driver.mjs', 'session-script.mjs'])
      copyFileSync(join(repo, 'scripts/store-fixtures', f), join(checkout, '.fixture-driver', f))
    const run = () =>
      execFileSync(process.execPath, ['--import', 'tsx', '.fixture-driver/driver.mjs', checkout, out], {
        cwd: checkout,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    let printed
    symlinkSync(join(repo, 'node_modules'), join(checkout, 'node_modules'))
    try {
      printed = run()
    } catch (err) {
      // only a package that today's node_modules lacks (or has another major of) is worth a clean install
      if (!/Cannot find (package|module)|ERR_MODULE_NOT_FOUND|does not provide an export/.test(String(err.stderr)))
        throw new Error(`${rev}: the driver failed:\n${err.stderr}`)
      process.stderr.write(`${rev}: with today's node_modules it failed (${String(err.stderr).split('\n')[0]}); npm ci\n`)
      rmSync(join(checkout, 'node_modules'))
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: checkout, stdio: 'inherit' })
      rmSync(out, { recursive: true, force: true })
      mkdirSync(out)
      printed = run()
    }
    const expected = JSON.parse(readFileSync(join(out, 'expected.json'), 'utf8'))
    if (expected.schemaVersion !== version) throw new Error(`${rev} wrote schema ${expected.schemaVersion}, not ${version}`)
    const dir = join(fixtures, `v${String(version).padStart(2, '0')}-${rev}`)
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'store.db.gz'), gzipSync(readFileSync(join(out, 'store.db')), { level: 9 }))
    // the states run to ~90 KB of JSON each: kept gzipped beside the rest, which stays readable
    const { states, ...rest } = expected
    writeFileSync(join(dir, 'states.json.gz'), gzipSync(JSON.stringify(states), { level: 9 }))
    const made = { rev, commit: git('rev-parse', rev), committed: git('log', '-1', '--format=%cI', rev) }
    writeFileSync(join(dir, 'expected.json'), `${JSON.stringify(Object.assign(made, rest), null, 2)}\n`)
    process.stdout.write(`v${version} ${rev}: ${printed.trim()}\n`)
  } finally {
    rmSync(out, { recursive: true, force: true })
    git('worktree', 'remove', '--force', checkout)
  }
}

const wanted = process.argv.slice(2).map(Number)
for (const target of SHIPPED) if (wanted.length === 0 || wanted.includes(target.version)) generate(target)
// expected.json as the repository's formatter writes JSON, so `biome ci` stays clean
execFileSync('npx', ['biome', 'format', '--write', fixtures], { cwd: repo, stdio: 'ignore' })
