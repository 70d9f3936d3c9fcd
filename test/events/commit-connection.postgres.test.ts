import { afterEach, describe, expect, it } from 'vitest'
import type { StoredEvent } from '../../src/events/envelope.js'
import { PostgresEventLog } from '../../src/events/postgres/log.js'
import { usePostgres } from '../support/use-postgres.js'
import { created, userMeta } from './fixtures/store.js'

/**
 * The PostgreSQL log's commits have a connection of their own (src/events/postgres/log.ts `writer`): a
 * loaded server's reads hold the pool's connections, and a commit queued behind them (the pool serves first
 * in, first out) waited 10 ms at the median and 150 at p99 with 400 sessions streaming
 * (docs/ARCHITECTURE.md "A loaded stream's deltas, merged").
 */
const server = usePostgres()

const logs: PostgresEventLog[] = []
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close()
})

describe('the PostgreSQL log’s commits', () => {
  it('commit while reads hold every connection of the pool', async () => {
    const log = await PostgresEventLog.open(await server().database(), { connections: 1 })
    logs.push(log)
    let release: () => void = () => {}
    const gate = new Promise<void>((r) => {
      release = r
    })
    // a read that holds the pool's only connection until the spec lets it go
    const reading = log.snapshot(() => gate, { committed: true })
    const appended = log.append('ses_a', [created()], { meta: userMeta })
    const outcome = await Promise.race([appended, new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 3_000))])
    release()
    await reading
    await appended
    expect(outcome === 'waiting' ? outcome : (outcome as StoredEvent[]).map((e) => [e.seq, e.type])).toEqual([
      [1, 'session.created'],
    ])
  })
})
