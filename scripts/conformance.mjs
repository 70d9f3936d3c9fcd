#!/usr/bin/env node
/**
 * `npm run test:conformance`: every client scenario of the pinned MCP
 * conformance suite (@modelcontextprotocol/conformance) against Chronicle's
 * client, through scripts/conformance-client.ts. The suite needs Node 22:
 * the `node` devDependency provides it, put first on PATH for the suite and
 * the client it runs, without touching the system Node. Scenarios run one
 * at a time (each starts its own servers); the exit code is 1 if any fails.
 *
 *   npm run test:conformance                 # all client scenarios
 *   npm run test:conformance -- auth/basic-cimd initialize   # some
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const nodeBin = join(root, 'node_modules/node/bin')
const suite = join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js')
if (!existsSync(join(nodeBin, 'node')) || !existsSync(suite)) {
  console.error('conformance: run `npm ci` first (devDependencies node@22 and @modelcontextprotocol/conformance)')
  process.exit(2)
}
const env = { ...process.env, PATH: `${nodeBin}:${process.env.PATH ?? ''}` }
const node = join(nodeBin, 'node')
const client = `${node} --import ${join(root, 'node_modules/tsx/dist/esm/index.mjs')} ${join(root, 'scripts/conformance-client.ts')}`

const listed = spawnSync(node, [suite, 'list', '--client'], { env, encoding: 'utf8' })
if (listed.status !== 0) {
  console.error(listed.stderr || listed.stdout)
  process.exit(2)
}
const all = [...listed.stdout.matchAll(/^\s+- (\S+)/gm)].map((m) => m[1])
const wanted = process.argv.slice(2)
const scenarios = wanted.length ? all.filter((s) => wanted.includes(s)) : all
if (scenarios.length === 0 || scenarios.length < wanted.length) {
  console.error(`conformance: unknown scenario among ${wanted.join(', ')}; known: ${all.join(', ')}`)
  process.exit(2)
}

const output = mkdtempSync(join(tmpdir(), 'chronicle-conformance-results-'))
const failed = []
for (const scenario of scenarios) {
  const started = Date.now()
  const run = spawnSync(
    node,
    [suite, 'client', '--command', client, '--scenario', scenario, '--output-dir', output, '--timeout', '60000'],
    { env, encoding: 'utf8', cwd: root, maxBuffer: 64 * 1024 * 1024 },
  )
  const text = `${run.stdout}\n${run.stderr}`
  const summary = /Passed: (\d+)\/(\d+), (\d+) failed/.exec(text)
  const ok = run.status === 0 && summary !== null && summary[3] === '0' && /OVERALL: PASSED/.test(text)
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  console.log(`${ok ? 'pass' : 'FAIL'}  ${scenario}  ${summary ? `${summary[1]}/${summary[2]} checks` : ''} (${seconds} s)`)
  if (!ok) {
    failed.push(scenario)
    // the failing checks and the client's own error, not the whole server log
    const lines = text.split('\n').filter((l) => /FAILURE|ERROR|Error|failed/.test(l))
    for (const line of lines.slice(-15)) console.log(`      ${line.trim()}`)
  }
}
rmSync(output, { recursive: true, force: true })
console.log(`conformance: ${scenarios.length - failed.length}/${scenarios.length} client scenarios passed`)
if (failed.length) console.log(`failed: ${failed.join(', ')}`)
process.exit(failed.length ? 1 : 0)
