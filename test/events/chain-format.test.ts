import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { decodeStored, storedRows } from '../../src/events/stored-rows.js'
import { openStore } from '../../src/projections/open.js'
import { created, delta, modelMeta, tempDirs, userMeta } from './fixtures/store.js'

/**
 * The hash each event is stored with is exactly docs/AUDIT.md's formula, computed here from the text it
 * names and nothing of src/events/chain.ts: a log written by any version of the store checks the same.
 *
 *   hash = sha256(previous hash of the session, hex ‖ "\n" ‖ JSON [seq, sessionId, version, type,
 *                 schemaVersion, at] ‖ "\n" ‖ meta as stored ‖ "\n" ‖ data as stored), cut to 16 bytes
 */

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

function documented(previous: Buffer | null, e: ReturnType<typeof fields>): Buffer {
  const line = JSON.stringify([e.seq, e.sessionId, e.version, e.type, e.schemaVersion, e.at])
  const text = `${previous ? previous.toString('hex') : ''}\n${line}\n${e.meta}\n${e.data}`
  return createHash('sha256').update(text, 'utf8').digest().subarray(0, 16)
}

function fields(row: Parameters<typeof decodeStored>[0]) {
  const decoded = decodeStored(row)
  if (typeof decoded === 'string') throw new Error(decoded)
  return decoded
}

describe('each stored hash', () => {
  it('is the documented sha256 of its text, chained per session, whether appended, batched or imported', async () => {
    const path = join(dirs.make(), 'store.db')
    const store = openStore(path)
    // an id JSON must escape, and one that is not ASCII: the fields line is JSON, not the raw id
    const odd = 'ses_"quoted"\\é'
    const part: ChronicleEvent = { type: 'text.started', data: { messageId: 'msg_1', partId: 'prt_1' } }
    const message: ChronicleEvent = {
      type: 'message.created',
      data: { messageId: 'msg_1', role: 'assistant', agent: 'build', model: 'm' },
    }
    store.append('ses_a', [created()], { meta: userMeta })
    store.append(odd, [created({ title: 'é "quoted" \u2028' })], { meta: userMeta, at: 1_700_000_000_123 })
    for (const id of ['ses_a', odd]) store.append(id, [message, part], { meta: modelMeta })
    // queued in one tick: one commit holding both sessions' deltas, interleaved
    const queued: Promise<unknown>[] = []
    for (let i = 0; i < 5; i++)
      for (const id of ['ses_a', odd])
        queued.push(store.enqueue(id, [delta('prt_1', `chunk ${i} é`)], { meta: modelMeta }))
    await Promise.all(queued)
    store.append('ses_a', [{ type: 'text.ended', data: { partId: 'prt_1' } }], { meta: modelMeta })
    const db = store.asCommitted.reader()

    const previous = new Map<string, Buffer>()
    let checked = 0
    let last: Buffer | null = null
    for (const row of storedRows(db)) {
      const e = fields(row)
      const expected = documented(previous.get(e.sessionId) ?? null, e)
      expect(row.hash?.toString('hex'), `seq ${row.seq}`).toBe(expected.toString('hex'))
      previous.set(e.sessionId, expected)
      last = expected
      checked++
    }
    expect(checked).toBe(17)
    const head = db.prepare('SELECT head_seq AS seq, head_hash AS hash FROM log_chain').get() as {
      seq: number
      hash: Buffer
    }
    expect({ seq: head.seq, hash: head.hash.toString('hex') }).toEqual({ seq: 17, hash: last?.toString('hex') })
    store.close()
  })
})
