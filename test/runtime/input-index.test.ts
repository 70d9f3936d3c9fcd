import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { type EventLog, sqliteLog } from '../../src/events/log.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { InputIndex } from '../../src/runtime/inbox/input-index.js'
import { created, tempDirs, userMeta } from '../events/fixtures/store.js'

/**
 * The input index (src/runtime/inbox/input-index.ts) answers "was this
 * inputId accepted in this session, and where?" from the log: read once per
 * session, then kept current by the commit listener, a bounded cache whose
 * evicted sessions are read again — and an input committed while a session's
 * inputs are being read is not lost between the read and the listener.
 */

const dirs = tempDirs()
let store: EventStore | undefined
let index: InputIndex | undefined
afterEach(() => {
  index?.close()
  store?.close()
  dirs.cleanup()
})

const accepted = (inputId: string): ChronicleEvent => ({
  type: 'input.accepted',
  data: {
    inputId,
    parts: [{ type: 'text', text: inputId }],
    delivery: 'queue',
    noReply: false,
    digest: `digest-${inputId}`,
  },
})

function open(): EventStore {
  store = openStore(join(dirs.make(), 'chronicle.db'))
  store.append('ses_a', [created()], { meta: userMeta })
  store.append('ses_b', [created()], { meta: userMeta })
  return store
}

describe('the input index', () => {
  it('finds an input accepted before it was first asked, and one accepted after', async () => {
    const s = open()
    const [first] = s.append('ses_a', [accepted('in_1')], { meta: userMeta })
    index = new InputIndex(sqliteLog(s))
    expect(await index.find('ses_a', 'in_1')).toEqual({ digest: 'digest-in_1', seq: first?.seq })
    expect(await index.find('ses_a', 'in_2')).toBeUndefined()
    const [second] = s.append('ses_a', [accepted('in_2')], { meta: userMeta })
    expect(await index.find('ses_a', 'in_2')).toEqual({ digest: 'digest-in_2', seq: second?.seq })
    expect(await index.find('ses_b', 'in_1')).toBeUndefined() // per session
  })

  it('reads an evicted session again and answers the same', async () => {
    const s = open()
    s.append('ses_a', [accepted('in_1')], { meta: userMeta })
    s.append('ses_b', [accepted('in_9')], { meta: userMeta })
    index = new InputIndex(sqliteLog(s), { entries: 1, bytes: 1 << 20, idleMs: 60_000 })
    const before = await index.find('ses_a', 'in_1')
    await index.find('ses_b', 'in_9') // ses_a is evicted
    expect(index.size).toBe(1)
    s.append('ses_a', [accepted('in_2')], { meta: userMeta }) // heard by no one: ses_a is not held
    expect(await index.find('ses_a', 'in_1')).toEqual(before)
    expect(await index.find('ses_a', 'in_2')).toMatchObject({ digest: 'digest-in_2' })
  })

  it('keeps an input committed while the session is being read', async () => {
    const s = open()
    s.append('ses_a', [accepted('in_1')], { meta: userMeta })
    const log = sqliteLog(s)
    // a log whose read answers late, as PostgreSQL's may: the read sees the log as it was when asked
    let committedMeanwhile: number | undefined
    const slow: EventLog = {
      ...log,
      readSessionOfType: async (sessionId, type) => {
        const found = await log.readSessionOfType(sessionId, type)
        committedMeanwhile = s.append('ses_a', [accepted('in_2')], { meta: userMeta })[0]?.seq
        return found
      },
    }
    index = new InputIndex(slow)
    expect(await index.find('ses_a', 'in_1')).toMatchObject({ digest: 'digest-in_1' })
    expect(await index.find('ses_a', 'in_2')).toEqual({ digest: 'digest-in_2', seq: committedMeanwhile })
  })
})
