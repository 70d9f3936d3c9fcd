import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { ChronicleError } from '../../src/events/errors.js'
import { openStore } from '../../src/projections/open.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { created, renamed, tempDirs, userMeta } from './fixtures/store.js'

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

const contender = fileURLToPath(new URL('./fixtures/contender.ts', import.meta.url))

/** Starts a contender; resolves `ready` once it waits for the go, `done` with its report. */
function contend(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', contender, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  let markReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (markReady = resolve))
  child.stdout.on('data', (d: Buffer) => {
    out += d
    if (out.startsWith('ready\n')) markReady()
  })
  child.stderr.on('data', (d: Buffer) => (err += d))
  const done = new Promise<{ name: string; committed: number[]; conflicts: number }>((resolve, reject) =>
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.slice('ready\n'.length))) : reject(new Error(`exit ${code}: ${err}`)),
    ),
  )
  return { ready, done, go: () => child.stdin.end('go\n') }
}

describe('two appenders on one file', () => {
  it('the one that read a stale version gets VERSION_CONFLICT; nothing is lost', () => {
    const path = join(dirs.make(), 'two.db')
    const a = openStore(path)
    const b = openStore(path)
    a.append('ses_a', [created()], { meta: userMeta })
    // Both decide on version 1 (what each read) …
    const readByA = a.version('ses_a')
    const readByB = b.version('ses_a')
    a.append('ses_a', [renamed('from a')], { meta: userMeta, expectedVersion: readByA })
    let conflict: unknown
    try {
      b.append('ses_a', [renamed('from b')], { meta: userMeta, expectedVersion: readByB })
    } catch (err) {
      conflict = err
    }
    // … exactly one wins.
    expect(conflict).toBeInstanceOf(ChronicleError)
    expect((conflict as ChronicleError).code).toBe('VERSION_CONFLICT')
    // B re-reads and retries: both facts are in the log, in order, and the read model agrees.
    b.append('ses_a', [renamed('from b')], { meta: userMeta, expectedVersion: b.version('ses_a') })
    expect(
      a.readSession('ses_a').map((e) => [e.version, e.type === 'session.renamed' ? e.data.title : e.type]),
    ).toEqual([
      [1, 'session.created'],
      [2, 'from a'],
      [3, 'from b'],
    ])
    expect(getSession(a, 'ses_a')).toMatchObject({ title: 'from b', version: 3 })
    expect(verify(a).differences).toEqual([])
    a.close()
    b.close()
  })

  it('two processes racing on one session commit every append exactly once, versions contiguous', async () => {
    const path = join(dirs.make(), 'race.db')
    const setup = openStore(path)
    setup.append('ses_race', [created()], { meta: userMeta })
    setup.close()
    const n = 150
    const racers = [contend([path, 'ses_race', String(n), 'p1']), contend([path, 'ses_race', String(n), 'p2'])]
    await Promise.all(racers.map((r) => r.ready))
    for (const r of racers) r.go()
    const results = await Promise.all(racers.map((r) => r.done))
    const store = openStore(path)
    const events = store.readSession('ses_race')
    expect(events.map((e) => e.version)).toEqual(Array.from({ length: 2 * n + 1 }, (_, i) => i + 1))
    for (const { name, committed } of results) {
      const mine = events.filter((e) => e.meta.command?.startsWith(`${name}-`))
      expect(mine.map((e) => e.meta.command)).toEqual(Array.from({ length: n }, (_, i) => `${name}-${i}`))
      expect(mine.map((e) => e.seq)).toEqual(committed)
    }
    expect(store.asCommitted.reader().pragma('integrity_check', { simple: true })).toBe('ok')
    expect(verify(store).differences).toEqual([])
    console.info(`racing appenders met ${results.map((r) => r.conflicts).join(' + ')} version conflicts`)
    store.close()
  })
})
