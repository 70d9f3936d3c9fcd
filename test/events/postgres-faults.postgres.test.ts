import { describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { LogSubscription } from '../../src/events/log-subscription.js'
import { checkServerVersion, PostgresEventLog } from '../../src/events/postgres/log.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * The PostgreSQL log when the database is not there: a clear STORE_UNAVAILABLE
 * (the URL named, its password hidden) at open and for an append that cannot
 * commit — nothing acknowledged for it — and the log goes on by itself once
 * the server is back, with everything acknowledged durably still there.
 */
const postgres = usePostgres()

const meta = { actor: 'user' as const }
const created: ChronicleEvent = { type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }
const renamed = (title: string): ChronicleEvent => ({ type: 'session.renamed', data: { title } })

describe('the PostgreSQL event log without its database', () => {
  it('refuses to open an unreachable server with STORE_UNAVAILABLE, naming it without its password', async () => {
    const url = 'postgres://chronicle:s3cret-pass@127.0.0.1:1/chronicle'
    const failure = await PostgresEventLog.open(url).catch((err: unknown) => err)
    expect(failure).toMatchObject({ code: 'STORE_UNAVAILABLE' })
    const message = (failure as Error).message
    expect(message).toContain('postgres://chronicle:***@127.0.0.1:1/chronicle')
    expect(message).not.toContain('s3cret-pass')
  })

  it('refuses a server older than 15 with STORE_UNSUPPORTED, naming it and its version, the password hidden', () => {
    const url = 'postgres://chronicle:s3cret-pass@db.internal:5432/chronicle'
    const refusal = (() => {
      try {
        checkServerVersion(140011, '14.11 (Debian 14.11-1)', url)
      } catch (err) {
        return err
      }
    })()
    expect(refusal).toMatchObject({ code: 'STORE_UNSUPPORTED' })
    expect((refusal as Error).message).toBe(
      'PostgreSQL at postgres://chronicle:***@db.internal:5432/chronicle is version 14.11 (Debian 14.11-1): Chronicle needs PostgreSQL 15 or later',
    )
    expect(() => checkServerVersion(150000, '15.0', url)).not.toThrow()
  })

  it('answers STORE_UNAVAILABLE while the server is down, then appends again once it is back; nothing durable is lost', async () => {
    const server = postgres()
    const url = await server.database()
    const log = await PostgresEventLog.open(url, { connections: 2 })
    try {
      await log.append('ses_a', [created, renamed('before')], { meta, durability: 'full' })
      await server.crash()
      await expect(log.append('ses_a', [renamed('while down')], { meta, durability: 'full' })).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      })
      await expect(log.readSession('ses_a')).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' })
      await server.restart()
      // the pool's connections died with the server: the next ones are new
      let after: unknown
      for (let attempt = 0; attempt < 20 && after === undefined; attempt++) {
        after = await log.append('ses_a', [renamed('after')], { meta, durability: 'full' }).catch(() => undefined)
        if (after === undefined) await new Promise((r) => setTimeout(r, 100))
      }
      const titles = (await log.readSession('ses_a')).map((e) => (e.data as { title?: string }).title)
      expect(titles).toEqual([undefined, 'before', 'after'])
      expect((await log.readSession('ses_a')).map((e) => e.seq)).toEqual([1, 2, 3])
    } finally {
      await log.close()
    }
  })

  it('a catch-up subscription whose page cannot be read waits, then reads on from where it was once the server is back', async () => {
    const server = postgres()
    const url = await server.database()
    const log = await PostgresEventLog.open(url, { connections: 2 })
    try {
      await log.append('ses_a', [created, renamed('one'), renamed('two')], { meta, durability: 'full' })
      await server.crash()
      const subscription = new LogSubscription(log, { sessions: ['ses_a'] }, 1)
      const first = subscription.next()
      const waited = await Promise.race([
        first.then(() => 'read'),
        new Promise((r) => setTimeout(() => r('waiting'), 500)),
      ])
      expect(waited).toBe('waiting') // not closed, not failed: waiting for the store
      await server.restart()
      expect((await first).value).toMatchObject({ seq: 2, type: 'session.renamed' })
      expect((await subscription.next()).value).toMatchObject({ seq: 3 })
      const live = subscription.next()
      await log.append('ses_a', [renamed('three')], { meta, durability: 'full' })
      expect((await live).value).toMatchObject({ seq: 4, data: { title: 'three' } })
      subscription.close()
    } finally {
      await log.close()
    }
  })
})
