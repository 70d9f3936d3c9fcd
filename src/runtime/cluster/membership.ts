import { nanoid } from 'nanoid'
import type { Claimed, ClusterNode, ClusterStore, Stranded } from '../../events/cluster.js'
import type { Fence } from '../../events/postgres/fence.js'
import { writeLease } from '../../tools/lease-watchdog.js'

/**
 * This node's membership of a cluster (docs/CLUSTER.md): it joins under an id
 * new at every start, heartbeats, keeps its lease, and claims the sessions of
 * nodes that died.
 *
 * - **Heartbeat** every `heartbeatMs` on a connection of its own. Each one that
 *   succeeds extends the lease to its send time + TTL − one heartbeat: the
 *   node gives its sessions up a heartbeat before any other may think it dead.
 * - **Lapse.** A node past its lease (the database away, or the process frozen
 *   and thawed) loses every session — its runs stop, its tools are killed —
 *   and joins again under a new id; its old id is then a dead node's, whose
 *   sessions anyone, itself included, claims with a new epoch and recovers.
 * - **Claims** at every heartbeat, in the heartbeat's own statement (an idle
 *   node writes once a heartbeat): a dead node's sessions, in batches, each
 *   with its epoch raised; `onClaimed` then runs the ordinary recovery on them.
 * - **Leave.** A node stopped cleanly says so, and is dead at once: the others
 *   claim its sessions at their next heartbeat.
 */

export interface MembershipOptions {
  /** the cluster's records (src/events/cluster.ts), on a connection whose queries give up after queryTimeoutMs */
  readonly store: ClusterStore
  readonly fence: Fence
  /** the node's name; its id is the name and a suffix new at every start (and at every lapse) */
  readonly name: string
  readonly address?: string | undefined
  readonly heartbeatMs: number
  readonly ttlMs: number
  /** sessions claimed per statement */
  readonly claimBatch?: number
  /** rewritten with the lease's end at every heartbeat: the tools' watchdogs read it (src/tools/lease-watchdog.ts) */
  readonly leaseFile?: string
  /** sessions just claimed (held by the fence already): recover them and continue their runs */
  readonly onClaimed: (sessionIds: readonly string[]) => Promise<void>
  /**
   * sessions about to be held: a run this node let go of (its lease lapsed) and now claims back must have
   * stopped first, else what it records as it stops lands under the new epoch; waited for a heartbeat at most
   */
  readonly beforeHold?: (sessionIds: readonly string[]) => Promise<void>
  /**
   * sessions of a dead node that no live node may claim (their directories are on its machine), with open work
   * not yet said to be stranded: looked for every few heartbeats; each is to be recorded (session.stranded)
   */
  readonly onStranded?: (stranded: readonly Stranded[]) => Promise<void>
  readonly log?: {
    info(obj: object, msg: string): void
    warn(obj: object, msg: string): void
    error(obj: object, msg: string): void
  }
}

export interface Membership {
  /** joined, first heartbeat made and first claims recovered */
  start(): Promise<void>
  /** the heartbeats stopped; the node leaves (`leave`: its sessions go to the others at once) */
  stop(opts?: { leave?: boolean }): Promise<void>
  nodes(): Promise<ClusterNode[]>
  readonly node: string
}

const DEFAULT_CLAIM_BATCH = 200
/** A dead node that owns nothing is listed this long, then forgotten. */
const KEEP_DEAD_MS = 60 * 60 * 1000
/** Dead nodes are looked for to forget every so many heartbeats. */
const FORGET_EVERY = 60
/** Stranded sessions are looked for every so many heartbeats: a read of a dead node's sessions, when there is one. */
const STRANDED_EVERY = 5

export const nodeId = (name: string) => `${name}-${nanoid(8)}`

/** A membership query that takes longer than a heartbeat, or a third of the TTL, is as good as failed. */
export const queryTimeoutMs = (settings: { heartbeatMs: number; ttlMs: number }) =>
  Math.max(settings.heartbeatMs, Math.floor(settings.ttlMs / 3))

export function createMembership(options: MembershipOptions): Membership {
  const { fence, heartbeatMs, ttlMs } = options
  const batch = options.claimBatch ?? DEFAULT_CLAIM_BATCH
  // a query that takes longer than a heartbeat's share of the TTL is as good as failed
  const { store } = options
  let joined = false
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  let ticking: Promise<void> | undefined
  let ticks = 0

  const join = async () => {
    await store.join({
      id: fence.node,
      name: options.name,
      ...(options.address && { address: options.address }),
    })
    joined = true
  }

  /** Past the lease: every session given up, a new id to join under at the next heartbeat. */
  const lapse = (why: string) => {
    const old = fence.node
    fence.renew(nodeId(options.name))
    fence.lease(0)
    if (options.leaseFile) writeLease(options.leaseFile, 0) // its tools' watchdogs kill them now
    joined = false
    options.log?.warn({ node: old, next: fence.node, why }, 'cluster lease lapsed: sessions given up, joining again')
    void store.leave(old).catch(() => {}) // if the database is back: the others need not wait out the TTL
  }

  /** The heartbeat, with a first batch of claims (and now and then the stranded sessions) in the same statement. */
  const beat = async (look = false): Promise<{ claimed: Claimed[]; stranded: readonly Stranded[] }> => {
    if (!joined) await join()
    const sent = performance.now()
    const { alive, claimed, stranded } = await store.heartbeatAndClaim(fence.node, ttlMs, batch, look)
    if (!alive) {
      lapse('the node is recorded as stopped')
      return { claimed: [], stranded: [] }
    }
    fence.lease(sent + ttlMs - heartbeatMs)
    if (options.leaseFile) writeLease(options.leaseFile, Date.now() - (performance.now() - sent) + ttlMs - heartbeatMs)
    return { claimed, stranded }
  }

  /** Claimed sessions held and recovered; more claimed while a batch comes back full. */
  const recover = async (first: Claimed[]) => {
    for (let claimed = first; claimed.length > 0; ) {
      if (options.beforeHold) {
        const ids = claimed.map((c) => c.sessionId)
        await Promise.race([options.beforeHold(ids), new Promise((r) => setTimeout(r, heartbeatMs).unref())])
      }
      for (const { sessionId, epoch } of claimed) fence.hold(sessionId, epoch)
      options.log?.info({ node: fence.node, sessions: claimed.length }, 'claimed the sessions of a dead node')
      await options.onClaimed(claimed.map((c) => c.sessionId))
      claimed = claimed.length < batch ? [] : await store.claim(fence.node, ttlMs, batch)
    }
  }

  const tick = async () => {
    // a process frozen past its lease wakes here: others may have claimed its sessions already
    if (joined && !fence.leased) lapse('the lease ran out before this heartbeat')
    let beaten: Awaited<ReturnType<typeof beat>>
    ticks++
    try {
      beaten = await beat(options.onStranded !== undefined && ticks % STRANDED_EVERY === 0)
    } catch (err) {
      if (joined && !fence.leased) lapse('heartbeats failed for the whole lease')
      else options.log?.warn({ err, node: fence.node }, 'cluster heartbeat failed')
      return
    }
    try {
      await recover(beaten.claimed)
      if (ticks % FORGET_EVERY === 0) await store.forgetDead(ttlMs, KEEP_DEAD_MS)
    } catch (err) {
      options.log?.error({ err, node: fence.node }, 'claiming sessions failed')
    }
    if (beaten.stranded.length > 0) {
      await options.onStranded?.(beaten.stranded).catch((err: unknown) => {
        options.log?.warn({ err, node: fence.node }, 'recording stranded sessions failed')
      })
    }
  }

  const schedule = () => {
    if (stopped) return
    timer = setTimeout(() => {
      ticking = tick().finally(() => {
        ticking = undefined
        schedule()
      })
    }, heartbeatMs)
  }

  return {
    get node() {
      return fence.node
    },
    async start() {
      await recover((await beat()).claimed)
      schedule()
    },
    async stop({ leave = true } = {}) {
      stopped = true
      clearTimeout(timer)
      await ticking
      if (leave && joined) await store.leave(fence.node).catch(() => {})
      await store.close()
    },
    nodes: () => store.list(ttlMs),
  }
}
