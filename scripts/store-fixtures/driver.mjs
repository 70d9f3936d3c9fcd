/**
 * Runs inside a checkout of an older commit (node --import tsx driver.mjs <checkout> <out dir>): writes the
 * scripted session (session-script.mjs) through THAT checkout's own store, projector and time travel, then
 * records what that code answers — the state at a list of seqs, its own verify, its chain head where it has
 * one — as expected.json beside store.db. See docs/UPGRADES.md.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { childSession, compactionAndRevert, firstRun, forkRun, mcpServer } from './session-script.mjs'

const [root, out] = process.argv.slice(2)
if (!root || !out) throw new Error('usage: driver.mjs <checkout> <out dir>')

/** The first of `paths` this checkout has, imported (modules moved between versions). */
async function load(...paths) {
  for (const p of paths) if (existsSync(join(root, p))) return import(pathToFileURL(join(root, p)).href)
  return undefined
}

const { openStore } = await load('src/projections/open.ts')
const { EVENT_TYPES } = await load('src/events/catalogue.ts')
const timeTravel = await load('src/projections/time-travel/time-travel.ts', 'src/projections/time-travel.ts')
const foldModule = await load('src/projections/fold/fold.ts', 'src/projections/fold.ts')
const verifyModule = await load('src/projections/upkeep/verify.ts', 'src/projections/verify.ts')
// the version's own real-runtime test world (a scripted model, the MCP reference server), where it has one
const auditHelpers = await load('test/audit/helpers.ts')
const has = (type) => EVENT_TYPES.includes(type)

mkdirSync(out, { recursive: true })
const file = join(out, 'store.db')
let clock = Date.parse('2026-11-30T00:00:00.000Z')
let store = openStore(file, { now: () => (clock += 1000) })

const PARENT = 'ses_fx_parent'
const CHILD = 'ses_fx_child'
const FORK = 'ses_fx_fork'
const seqs = { [PARENT]: [], [CHILD]: [], [FORK]: [] }
const actorOf = (type) =>
  type.startsWith('input.accepted') || type.startsWith('session.') || type === 'permission.replied' ? 'user' : 'runtime'

function append(stream, [type, data]) {
  const [stored] = store.append(stream, [{ type, data }], { meta: { actor: actorOf(type) } })
  seqs[stream]?.push(stored.seq)
  return stored.seq
}

let firstRunEnd = 0
for (const step of firstRun(has)) {
  if (step === 'child') for (const e of childSession()) append(CHILD, e)
  else {
    const seq = append(PARENT, step)
    if (step[0] === 'run.finished') firstRunEnd = seq
  }
}
for (const e of compactionAndRevert(has, firstRunEnd)) append(PARENT, e)
append(FORK, ['session.forked', { from: { sessionId: PARENT, seq: firstRunEnd }, title: 'fork' }])
for (const e of forkRun()) append(FORK, e)
if (has('mcp.server.ready')) for (const e of mcpServer()) append('sys_mcp', e)
store.flush?.()

/**
 * A session run by the version's real runtime: a scripted model that calls the MCP server's echo tool, a
 * compaction and one more input. Its steps record what each request was compiled from, so `audit` rebuilds
 * and checks them (the scripted events above have none to check).
 */
if (auditHelpers?.auditWorld) {
  store.close()
  const world = await auditHelpers.auditWorld(
    [
      { when: { userContains: '<transcript>' }, text: '## Objective\n- echo things' },
      { when: { userContains: 'echo hello', afterToolResult: false }, toolCalls: [{ name: 'ev_echo', input: { message: 'hello' } }] },
      { when: { userContains: 'echo hello', afterToolResult: true }, text: 'It said hello.' },
      { when: { userContains: 'after the summary' }, text: 'Still here.' },
    ],
    file,
  )
  const id = world.session()
  const text = (t) => ({ parts: [{ type: 'text', text: t }] })
  world.runtime.submit(id, text('echo hello'))
  await world.runtime.idle(id)
  world.runtime.compact(id)
  await world.runtime.idle(id)
  world.runtime.submit(id, text('after the summary'))
  await world.runtime.idle(id)
  await world.close()
  store = openStore(file, { now: () => (clock += 1000) })
  seqs[id] = store.readSession(id).map((e) => e.seq)
}

/** The state right after `seq` as this version answers it: its stateAt, or (before time travel) its fold. */
function stateAt(sessionId, seq) {
  if (timeTravel?.stateAt) return timeTravel.stateAt(store, sessionId, seq)
  const view = foldModule.foldSession(store, sessionId, seq)
  const byId = (m) => [...m.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  return { session: view.session, messages: byId(view.messages), parts: byId(view.parts), seq }
}

/** Every third event of each session and its last: enough points to pin every kind of change. */
const states = []
for (const [sessionId, own] of Object.entries(seqs)) {
  const picked = own.filter((_, i) => i % 3 === 2 || i === own.length - 1)
  // an inherited seq answers the parent's state then (time travel; a plain fold knows only the fork's own)
  if (sessionId === FORK && timeTravel?.stateAt) picked.unshift(firstRunEnd)
  for (const seq of picked) states.push({ sessionId, seq, state: stateAt(sessionId, seq) })
}

const report = verifyModule.verify(store, {})
const audit = (await load('src/runtime/audit/audit.ts'))?.audit
// audit took the store until the store port (schema 16's code): then the ports over it, and a promise
const ports = (await load('src/projections/store-ports.ts'))?.sqlitePorts
const audited = audit ? await audit(ports ? ports(store) : store, 'all') : null
if (audited && audited.mismatches.length > 0) throw new Error(`this version's own audit: ${JSON.stringify(audited.mismatches[0])}`)
if (report.differences.length > 0) throw new Error(`this version's own verify differs: ${JSON.stringify(report.differences[0])}`)
const db = store.reader ? store.reader() : store.db
const migrations = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all()
const events = db.prepare('SELECT COUNT(*) FROM events').pluck().get()
store.close()

const expected = {
  schemaVersion: Math.max(...migrations),
  migrations,
  events,
  sessions: Object.keys(seqs),
  chain: report.chain ? { head: report.chain.head, unchained: report.chain.unchained } : null,
  audit: audited ? { steps: audited.steps, verified: audited.verified } : null,
  states,
}
writeFileSync(join(out, 'expected.json'), `${JSON.stringify(expected, null, 1)}\n`)
console.log(JSON.stringify({ schemaVersion: expected.schemaVersion, events, states: states.length }))
