import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { claimSessions, joinCluster, leaveCluster } from '../../src/events/postgres/cluster-nodes.js'
import { Fence } from '../../src/events/postgres/fence.js'
import { PG_TYPES } from '../../src/events/postgres/log.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * Which node may claim a dead node's session (docs/CLUSTER.md "Workspaces that move"): its directory is on
 * the dead node's machine, so a node on that machine — unless the directory lies in one every node mounts
 * alike, when any node may. A session pinned to a machine no live node runs on waits for one.
 */
const server = usePostgres()
const TTL = 60_000

describe('claims by where a session’s directory is', () => {
  const closing: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closing.splice(0)) await close()
  })

  it('claims a dead node’s session on its machine, or on any machine when its directory is shared', async () => {
    const url = await server().database()
    const db = new pg.Pool({ connectionString: url, max: 2, types: PG_TYPES })
    const log = await openPostgresStore(url, { fence: new Fence('node-a') })
    closing.push(
      () => db.end(),
      () => log.close(),
    )
    await joinCluster(db, { id: 'node-a', name: 'node-a' }, 'machine-1')
    // titled with what PostgreSQL's json refuses (a NUL, a lone surrogate): the claim must not read it as json
    const created = (directory: string): ChronicleEvent => ({
      type: 'session.created',
      data: { directory, agent: 'build', model: null, title: 'odd \u0000 \ud800' },
    })
    await log.append('ses_home', [created('/home/user/project')], { meta: { actor: 'user' } })
    await log.append('ses_shared', [created('/srv/shared/project')], { meta: { actor: 'user' } })
    await log.append('ses_root', [created('/srv/shared')], { meta: { actor: 'user' } })
    await log.append('ses_alike', [created('/srv/sharedness/project')], { meta: { actor: 'user' } })
    await leaveCluster(db, 'node-a')

    const elsewhere = { host: 'machine-2', sharedDirectories: ['/srv/shared'] }
    await joinCluster(db, { id: 'node-b', name: 'node-b' }, elsewhere.host)
    const byB = await claimSessions(db, 'node-b', TTL, 100, elsewhere)
    expect(byB.map((c) => c.sessionId).sort()).toEqual(['ses_root', 'ses_shared'])

    // the others wait for a node on machine-1: one that starts there claims them
    expect(await claimSessions(db, 'node-b', TTL, 100, elsewhere)).toEqual([])
    await joinCluster(db, { id: 'node-c', name: 'node-c' }, 'machine-1')
    const byC = await claimSessions(db, 'node-c', TTL, 100, { host: 'machine-1', sharedDirectories: [] })
    expect(byC.map((c) => c.sessionId).sort()).toEqual(['ses_alike', 'ses_home'])
    expect(byC.every((c) => c.epoch === 2)).toBe(true)
  })
})
