/**
 * The cluster's records as a port (docs/CLUSTER.md): the nodes sharing one
 * database, their heartbeats, and the claims that move a dead node's sessions
 * to a survivor. The membership (src/runtime/cluster/membership.ts) is handed
 * one; PostgreSQL's is src/events/postgres/cluster-nodes.ts, the only engine a
 * cluster runs on.
 */

export interface ClusterNode {
  readonly id: string
  readonly name: string
  readonly address: string | null
  readonly startedAt: number
  /** ms since its last heartbeat, by the database's clock */
  readonly heartbeatAgeMs: number
  readonly alive: boolean
  readonly stopped: boolean
  /** sessions whose stream row names it */
  readonly sessions: number
}

export interface Claimed {
  readonly sessionId: string
  readonly epoch: number
}

/**
 * Where a node runs, for its claims (docs/CLUSTER.md "Workspaces that move"): a session's directory is on one
 * machine unless it lies in a directory every node mounts at the same path (`sharedDirectories`). A dead
 * node's session is claimed by a node on its host, or by any node when its directory is shared.
 */
export interface NodePlace {
  /** the machine's name (os.hostname() unless configured) */
  readonly host: string | null
  /** absolute paths every node mounts alike */
  readonly sharedDirectories: readonly string[]
}

/** No place known: every dead node's session may be claimed by any node whose own host is unknown too. */
export const ANYWHERE: NodePlace = { host: null, sharedDirectories: [] }

/** A dead node's session that no live node may claim (its directory is on the dead node's machine), with work. */
export interface Stranded {
  readonly sessionId: string
  /** the session's version when it was found so */
  readonly version: number
  /** the dead node that owns it */
  readonly node: string
  /** the machine its directory is on */
  readonly host: string
}

export interface Heartbeat {
  /** false: the node is recorded as stopped, and claimed nothing */
  readonly alive: boolean
  readonly claimed: Claimed[]
  /** when asked for: sessions no live node may claim, not yet said to be stranded (session.stranded) */
  readonly stranded: Stranded[]
}

export interface ClusterStore {
  join(node: { id: string; name: string; address?: string }): Promise<void>
  /** the heartbeat with a first batch of claims and, with `lookForStranded`, the stranded sessions */
  heartbeatAndClaim(nodeId: string, ttlMs: number, limit: number, lookForStranded?: boolean): Promise<Heartbeat>
  /** up to `limit` sessions of dead nodes, or of none, made `nodeId`'s with their epochs raised */
  claim(nodeId: string, ttlMs: number, limit: number): Promise<Claimed[]>
  /** the node is dead at once to the others */
  leave(nodeId: string): Promise<void>
  /** dead nodes that own nothing and died over `keepMs` ago, forgotten */
  forgetDead(ttlMs: number, keepMs: number): Promise<void>
  list(ttlMs: number): Promise<ClusterNode[]>
  close(): Promise<void>
}
