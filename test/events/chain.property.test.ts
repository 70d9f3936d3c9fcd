import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { inflateRawSync } from 'node:zlib'
import Database from 'better-sqlite3'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { checkChain } from '../../src/events/chain-check.js'
import { eventHash } from '../../src/events/chain.js'
import { registerFunctions } from '../../src/events/schema.js'
import { openStore } from '../../src/projections/open.js'
import { rebuild } from '../../src/projections/upkeep/rebuild.js'
import { verify } from '../../src/projections/upkeep/verify.js'

/**
 * The log is tamper-evident (docs/AUDIT.md): any one-byte change to any
 * stored event — its data (plain, deflated or with an interned part id),
 * type, meta, seq, version, time or hash — breaks a hash chain, and the check names the
 * first event it reaches. A plain connection with the triggers dropped plays
 * the attacker, as someone holding the database file would.
 */

const dir = mkdtempSync(join(tmpdir(), 'chronicle-chain-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Two sessions interleaved: creation, long (deflated) data, streamed deltas, several metas. */
function original(): string {
  const path = join(dir, 'original.db')
  const store = openStore(path)
  const created = (id: string): ChronicleEvent => ({
    type: 'session.created',
    data: { directory: `/work/${id}`, agent: 'build', model: null },
  })
  store.append('ses_a', [created('ses_a')], { meta: { actor: 'user' } })
  store.append('ses_b', [created('ses_b')], { meta: { actor: 'user', command: 'create' } })
  for (const id of ['ses_a', 'ses_b']) {
    store.append(id, [{ type: 'session.renamed', data: { title: `a long title ${'x'.repeat(400)}` } }], {
      meta: { actor: 'user' },
    })
    store.append(
      id,
      [
        { type: 'run.started', data: { runId: `run_${id}`, reason: 'input' } },
        { type: 'message.created', data: { messageId: `msg_${id}`, role: 'assistant', agent: 'build', model: 'm' } },
        { type: 'text.started', data: { messageId: `msg_${id}`, partId: `prt_${id}` } },
        ...Array.from(
          { length: 5 },
          (_, i): ChronicleEvent => ({
            type: 'text.delta',
            data: { partId: `prt_${id}`, text: `chunk ${i} é` },
          }),
        ),
        { type: 'text.ended', data: { partId: `prt_${id}` } },
      ],
      { meta: { actor: 'model', run: `run_${id}` } },
    )
  }
  store.close()
  return path
}

const source = original()
const count = (() => {
  const db = new Database(source, { readonly: true })
  const n = db.prepare('SELECT COUNT(*) FROM event_log').pluck().get() as number
  db.close()
  return n
})()

type Field = 'data' | 'type' | 'meta' | 'seq' | 'version' | 'at' | 'hash'
let copies = 0

/** The text a deflated value inflates to, or undefined when it does not inflate. */
function decodesTo(data: Buffer): string | undefined {
  try {
    return inflateRawSync(data).toString()
  } catch {
    return undefined
  }
}

/**
 * A copy of the log with one byte of event `seq`'s `field` changed; returns the first seq the change reaches
 * (0: the byte changed, the event did not).
 */
function tamper(seq: number, field: Field, at: number, bit: number): { db: Database.Database; reached: number } {
  const path = join(dir, `copy-${copies++}.db`)
  copyFileSync(source, path)
  const db = new Database(path)
  registerFunctions(db)
  for (const t of ['event_log_no_update', 'event_metas_no_update', 'event_log_no_replace'])
    db.exec(`DROP TRIGGER IF EXISTS ${t}`)
  const row = db.prepare('SELECT * FROM event_log WHERE seq = ?').get(seq) as Record<string, unknown>
  const flip = (buf: Buffer) => {
    const i = at % buf.length
    buf[i] = (buf[i] as number) ^ (1 << bit)
    return buf
  }
  const ascii = (text: string) => {
    // one byte of the text, kept a printable ASCII byte so that the column still holds one-byte-changed text
    const codes = [...Buffer.from(text)]
    const positions = codes.flatMap((c, i) => (c >= 0x21 && c < 0x7f ? [i] : []))
    const i = positions[at % positions.length] as number
    codes[i] = (codes[i] as number) === 0x41 ? 0x42 : 0x41
    return Buffer.from(codes).toString()
  }
  let reached = seq
  switch (field) {
    case 'data': {
      const data = row['data']
      const changed = Buffer.isBuffer(data) ? flip(Buffer.from(data)) : ascii(data as string)
      // A deflated stream's last byte has padding bits: flipping one changes the bytes, not the event.
      if (Buffer.isBuffer(data) && decodesTo(changed as Buffer) === decodesTo(data)) return { db, reached: 0 }
      db.prepare('UPDATE event_log SET data = ? WHERE seq = ?').run(changed, seq)
      break
    }
    case 'type': {
      const other = db.prepare('SELECT id FROM event_types WHERE id <> ? ORDER BY id LIMIT 1').pluck().get(row['type'])
      db.prepare('UPDATE event_log SET type = ? WHERE seq = ?').run(other, seq)
      break
    }
    case 'meta': {
      // a meta is stored once and shared: the change reaches the first event that uses it
      const meta = db.prepare('SELECT meta FROM event_metas WHERE id = ?').pluck().get(row['meta']) as string
      db.prepare('UPDATE event_metas SET meta = ? WHERE id = ?').run(ascii(meta), row['meta'])
      reached = db.prepare('SELECT MIN(seq) FROM event_log WHERE meta = ?').pluck().get(row['meta']) as number
      break
    }
    case 'seq':
      db.prepare('UPDATE event_log SET seq = ? WHERE seq = ?').run(seq ^ (1 << (16 + bit)), seq)
      break
    case 'at':
      db.prepare('UPDATE event_log SET at = ? WHERE seq = ?').run((row['at'] as number) ^ (1 << bit), seq)
      break
    case 'hash':
      db.prepare('UPDATE event_log SET hash = ? WHERE seq = ?').run(flip(Buffer.from(row['hash'] as Buffer)), seq)
      break
    case 'version':
      db.prepare('UPDATE event_log SET version = ? WHERE seq = ?').run(
        (row['version'] as number) ^ (1 << (8 + bit)),
        seq,
      )
      break
  }
  return { db, reached }
}

describe('the hash chain', () => {
  it('holds on the log as written', () => {
    const db = new Database(source, { readonly: true })
    const report = checkChain(db)
    db.close()
    expect(report).toMatchObject({ events: count, unchained: 0, breaks: [] })
    expect(report.head.seq).toBe(count)
  })

  it('names the first event any one-byte change reaches', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: count }),
        fc.constantFrom<Field>('data', 'type', 'meta', 'seq', 'version', 'at', 'hash'),
        fc.nat(),
        fc.integer({ min: 0, max: 6 }),
        (seq, field, at, bit) => {
          const { db, reached } = tamper(seq, field, at, bit)
          try {
            if (reached === 0) {
              // nothing to find. Not `return expect(…)`: fast-check fails a property that returns anything
              // but true or undefined, so this branch failed whenever a seed reached it (CI, seed -1061548581)
              expect(checkChain(db).breaks).toEqual([])
              return
            }
            const { breaks } = checkChain(db)
            expect(breaks.length).toBeGreaterThan(0)
            expect(breaks[0]?.seq).toBe(reached)
          } finally {
            db.close()
          }
        },
      ),
      { numRuns: 150 },
    )
  })

  it('notices a removed tail: the head no longer matches', () => {
    const path = join(dir, 'truncated.db')
    copyFileSync(source, path)
    const db = new Database(path)
    db.exec('DROP TRIGGER event_log_no_delete')
    db.prepare('DELETE FROM event_log WHERE seq = ?').run(count)
    const { breaks } = checkChain(db)
    db.close()
    expect(breaks).toEqual([expect.objectContaining({ seq: count, reason: expect.stringMatching(/head/) })])
  })

  it('verify reports an edit that a rebuild folded into the read models', () => {
    const path = join(dir, 'edited.db')
    copyFileSync(source, path)
    const db = new Database(path)
    db.exec('DROP TRIGGER event_log_no_update')
    registerFunctions(db)
    const seq = db.prepare("SELECT seq FROM events WHERE data LIKE '%chunk 0%' LIMIT 1").pluck().get() as number
    const data = db.prepare('SELECT data FROM event_log WHERE seq = ?').pluck().get(seq) as string
    db.prepare('UPDATE event_log SET data = ? WHERE seq = ?').run(data.replace('chunk 0', 'chunk 9'), seq)
    db.close()
    const store = openStore(path)
    try {
      rebuild(store)
      const report = verify(store)
      expect(report.differences).toEqual([]) // the read models agree with the edited log…
      expect(report.chain.breaks[0]).toMatchObject({ seq, reason: 'its hash does not match the event and its chain' })
    } finally {
      store.close()
    }
  })

  it('a recorded head digest catches an attacker who rewrites an event and every later hash of its stream', () => {
    const before = new Database(source, { readonly: true })
    const recorded = checkChain(before).head
    before.close()

    const path = join(dir, 'rewritten.db')
    copyFileSync(source, path)
    const db = new Database(path)
    registerFunctions(db)
    for (const t of ['event_log_no_update', 'event_log_no_replace']) db.exec(`DROP TRIGGER ${t}`)
    const target = db.prepare("SELECT seq, session_id FROM events WHERE data LIKE '%chunk 0%' LIMIT 1").get() as {
      seq: number
      session_id: string
    }
    const data = db.prepare('SELECT data FROM event_log WHERE seq = ?').pluck().get(target.seq) as string
    db.prepare('UPDATE event_log SET data = ? WHERE seq = ?').run(data.replace('chunk 0', 'chunk 9'), target.seq)
    // recompute the stream's chain from the edit on, and the head, as someone who read src/events/chain.ts would
    const rows = db
      .prepare(
        'SELECT seq, session_id, version, type, schema_version, data, meta, at FROM events WHERE session_id = ? ORDER BY version',
      )
      .all(target.session_id) as {
      seq: number
      session_id: string
      version: number
      type: string
      schema_version: number
      data: string
      meta: string
      at: number
    }[]
    let previous: Buffer | null = null
    for (const r of rows) {
      const hash = eventHash(previous, {
        seq: r.seq,
        sessionId: r.session_id,
        version: r.version,
        type: r.type,
        schemaVersion: r.schema_version,
        at: r.at,
        meta: r.meta,
        data: r.data,
      })
      db.prepare('UPDATE event_log SET hash = ? WHERE seq = ?').run(hash, r.seq)
      if (r.seq === count) db.prepare('UPDATE log_chain SET head_hash = ?').run(hash)
      previous = hash
    }

    expect(checkChain(db).breaks).toEqual([]) // the chains alone are consistent again…
    const anchored = checkChain(db, { anchor: recorded }).breaks // …but not with the digest recorded before
    db.close()
    expect(anchored).toEqual([
      expect.objectContaining({
        seq: recorded.seq,
        reason: expect.stringMatching(/no longer gives the digest recorded/),
      }),
    ])
  })
})
