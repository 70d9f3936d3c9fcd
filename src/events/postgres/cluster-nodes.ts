import type pg from 'pg'
import { SYSTEM_STREAM_PREFIX } from '../append-rules.js'
import {
  ANYWHERE,
  type Claimed,
  type ClusterNode,
  type ClusterStore,
  type Heartbeat,
  type NodePlace,
  type Stranded,
} from '../cluster.js'
import { newPool } from './log.js'

/**
 * The nodes of a cluster as its database records them (docs/CLUSTER.md): one
 * row per process that joined (schema migration 4), its heartbeat, and the
 * claims that move a dead node's sessions to a survivor. Every time is the
 * database's clock, in ms, so nodes whose clocks differ agree on who is dead.
 */

const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint'

/** A node is dead once its heartbeat is older than the TTL, or once it said it stopped. */
const DEAD = `(stopped_at IS NOT NULL OR heartbeat_at < ${NOW} - $2)`

/**
 * Up to $3 sessions of nodes dead to $1 (TTL $2), or of none, locked for a claim; others' locked rows skipped.
 * A dead node's session is $1's to claim when the dead node ran on $1's host ($4), on a host nobody recorded,
 * or when the session's directory lies in one of the directories every node shares ($5, each ending in '/'):
 * a directory only another machine has stays that machine's (docs/CLUSTER.md "Workspaces that move"). The
 * directory is read by chronicle_json (schema migration 7): a title with a character PostgreSQL's jsonb refuses
 * (\u0000, a lone surrogate) must not fail the heartbeat that carries the claim.
 */
const PICK = `dead AS (
    SELECT id, host FROM cluster_nodes WHERE id <> $1 AND ${DEAD}
  ), picked AS (
    SELECT st.id FROM streams st LEFT JOIN dead ON dead.id = st.owner
    WHERE (dead.id IS NOT NULL AND (dead.host IS NULL OR dead.host = $4 OR EXISTS (
             SELECT 1 FROM sessions s, unnest($5::text[]) AS shared (prefix)
             WHERE s.id = st.id AND starts_with((chronicle_json(s.data) ->> 'directory') || '/', shared.prefix))))
       OR (st.owner IS NULL AND NOT starts_with(st.id, '${SYSTEM_STREAM_PREFIX}'))
    ORDER BY st.id LIMIT $3 FOR UPDATE OF st SKIP LOCKED
  )`

/**
 * With $6 true, up to $3 sessions no live node may claim (`STRANDED`): a dead node's, pinned to its machine —
 * a host other than $1's, no live node on it, the directory in no shared one — with open work (a run, or
 * inputs waiting) not yet said to be stranded by that node. The directory and the work are read by
 * chronicle_json (schema migration 7). With $6 false, the heartbeat looks at nothing more.
 */
const STRANDED = `stranded AS (
    SELECT st.id, st.version, dead.id AS node, dead.host FROM streams st JOIN dead ON dead.id = st.owner,
      LATERAL (SELECT chronicle_json(data) AS j FROM sessions WHERE id = st.id) s
    WHERE $6 AND dead.host IS NOT NULL AND dead.host IS DISTINCT FROM $4
      AND NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.host = dead.host AND NOT ${DEAD})
      AND NOT EXISTS (SELECT 1 FROM unnest($5::text[]) AS shared (prefix)
                      WHERE starts_with((s.j ->> 'directory') || '/', shared.prefix))
      AND ((s.j ->> 'run') IS NOT NULL OR jsonb_array_length(COALESCE(s.j -> 'inbox', '[]'::jsonb)) > 0)
      AND (s.j #>> '{stranded,node}') IS DISTINCT FROM dead.id
    ORDER BY st.id LIMIT $3
  )`

/** The claim's parameters after $1–$3: the node's host and its shared directories, each ending in '/'. */
const placeParams = (place: NodePlace) => [
  place.host,
  place.sharedDirectories.map((d) => (d.endsWith('/') ? d : `${d}/`)),
]

type Db = Pick<pg.Pool, 'query'>

/**
 * The cluster's records on `url` (src/events/cluster.ts), on a connection of their own: a heartbeat never waits
 * behind a loaded server's reads, and gives up after `timeoutMs` (a lease must not ride on a query that hangs).
 */
export function openPostgresCluster(url: string, timeoutMs: number, place: NodePlace = ANYWHERE): ClusterStore {
  const db = newPool(url, 1, { pipeline: false, timeoutMs })
  return {
    join: (node) => joinCluster(db, node, place.host),
    heartbeatAndClaim: (nodeId, ttlMs, limit, look) => heartbeatAndClaim(db, nodeId, ttlMs, limit, place, look),
    claim: (nodeId, ttlMs, limit) => claimSessions(db, nodeId, ttlMs, limit, place),
    leave: (nodeId) => leaveCluster(db, nodeId),
    forgetDead: (ttlMs, keepMs) => forgetDeadNodes(db, ttlMs, keepMs),
    list: (ttlMs) => listNodes(db, ttlMs),
    close: () => db.end().catch(() => {}),
  }
}

/** `host`: the machine it runs on, which decides the sessions it may claim (PICK) */
export async function joinCluster(
  db: Db,
  node: { id: string; name: string; address?: string },
  host: string | null = null,
): Promise<void> {
  await db.query(
    `INSERT INTO cluster_nodes (id, name, address, host, started_at, heartbeat_at)
     VALUES ($1, $2, $3, $4, ${NOW}, ${NOW})`,
    [node.id, node.name, node.address ?? null, host],
  )
}

/** The node leaves: dead at once for every other node, which claims its sessions at its next heartbeat. */
export async function leaveCluster(db: Db, nodeId: string): Promise<void> {
  await db.query(`UPDATE cluster_nodes SET stopped_at = ${NOW} WHERE id = $1 AND stopped_at IS NULL`, [nodeId])
}

/**
 * Up to `limit` sessions of dead nodes — and sessions no node owns yet, made before the database served a
 * cluster — made `nodeId`'s, each with its epoch raised: an append still on its way from a deposed owner finds
 * an epoch that is not its own (src/events/postgres/fence.ts). Rows another node is claiming are skipped, not
 * waited for, so survivors claiming at once share the work.
 */
export async function claimSessions(
  db: Db,
  nodeId: string,
  ttlMs: number,
  limit: number,
  place: NodePlace = ANYWHERE,
): Promise<Claimed[]> {
  const { rows } = await db.query<{ id: string; epoch: number }>(
    `WITH ${PICK}
     UPDATE streams SET owner = $1, epoch = streams.epoch + 1
     FROM picked WHERE streams.id = picked.id
     RETURNING streams.id, streams.epoch`,
    [nodeId, ttlMs, limit, ...placeParams(place)],
  )
  return rows.map((r) => ({ sessionId: r.id, epoch: r.epoch }))
}

/**
 * The heartbeat and a first batch of claims in one statement: an idle node writes once a heartbeat. Nothing is
 * claimed by a node whose row says it stopped (`alive` false: it must not act as a member).
 */
export async function heartbeatAndClaim(
  db: Db,
  nodeId: string,
  ttlMs: number,
  limit: number,
  place: NodePlace = ANYWHERE,
  lookForStranded = false,
): Promise<Heartbeat> {
  const { rows } = await db.query<{
    alive: boolean
    id: string | null
    epoch: number | null
    stranded: Stranded[] | string | null
  }>(
    `WITH beat AS (
       UPDATE cluster_nodes SET heartbeat_at = ${NOW} WHERE id = $1 AND stopped_at IS NULL RETURNING id
     ), ${PICK}, claimed AS (
       UPDATE streams SET owner = $1, epoch = streams.epoch + 1
       FROM picked WHERE streams.id = picked.id AND EXISTS (SELECT 1 FROM beat)
       RETURNING streams.id, streams.epoch
     ), ${STRANDED}
     SELECT EXISTS (SELECT 1 FROM beat) AS alive, c.id, c.epoch,
       (SELECT json_agg(json_build_object('sessionId', id, 'version', version, 'node', node, 'host', host))
          FROM stranded) AS stranded
     FROM (SELECT 1) AS one LEFT JOIN claimed c ON true`,
    [nodeId, ttlMs, limit, ...placeParams(place), lookForStranded],
  )
  const stranded = rows[0]?.stranded ?? null
  return {
    alive: rows[0]?.alive === true,
    claimed: rows.flatMap((r) => (r.id === null ? [] : [{ sessionId: r.id, epoch: r.epoch as number }])),
    stranded: typeof stranded === 'string' ? (JSON.parse(stranded) as Stranded[]) : (stranded ?? []),
  }
}

/** Dead nodes that own nothing any more and died over `keepMs` ago: forgotten. */
export async function forgetDeadNodes(db: Db, ttlMs: number, keepMs: number): Promise<void> {
  await db.query(
    `DELETE FROM cluster_nodes n WHERE ${DEAD} AND heartbeat_at < ${NOW} - $1
       AND NOT EXISTS (SELECT 1 FROM streams WHERE owner = n.id)`,
    [keepMs, ttlMs],
  )
}

export async function listNodes(db: Db, ttlMs: number): Promise<ClusterNode[]> {
  const { rows } = await db.query<{
    id: string
    name: string
    address: string | null
    started_at: number
    age: number
    stopped: boolean
    sessions: number
  }>(
    `SELECT n.id, n.name, n.address, n.started_at, ${NOW} - n.heartbeat_at AS age, n.stopped_at IS NOT NULL AS stopped,
            (SELECT count(*) FROM streams WHERE owner = n.id)::integer AS sessions
     FROM cluster_nodes n ORDER BY n.started_at, n.id`,
  )
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    address: r.address,
    startedAt: r.started_at,
    heartbeatAgeMs: r.age,
    alive: !r.stopped && r.age <= ttlMs,
    stopped: r.stopped,
    sessions: r.sessions,
  }))
}
