import { isSystemStream } from '../append-rules.js'
import { ChronicleError } from '../errors.js'

/**
 * A node's hold on the sessions it owns, on a cluster of nodes sharing one
 * PostgreSQL (docs/CLUSTER.md "Ownership and the fence"): each session's
 * epoch as this node holds it. A session's owner and epoch are on its stream's
 * row, which every append locks to number its events (src/events/postgres/log.ts);
 * with a fence the append also requires that row to name this node and the
 * epoch it holds — in the same transaction, so a node whose session a survivor
 * claimed (a higher epoch) appends nothing, however late its append arrives.
 *
 * A session this node creates is its own at epoch 1 (its stream's row is
 * inserted by the append that creates it). System streams (tokens, shares)
 * are every node's: they are not fenced, their expected versions order them.
 */
export class Fence {
  private readonly held = new Map<string, number>()
  private readonly lost = new Set<(sessionId: string) => void>()
  private leaseUntil = Number.POSITIVE_INFINITY

  /** `node`: this process's id in `cluster_nodes`, new at every start */
  constructor(private current: string) {}

  get node(): string {
    return this.current
  }

  /**
   * Every session lost, and the node a new member under `node`: what a node does when its lease lapsed (it
   * may have been declared dead, and its sessions claimed, while it could not heartbeat).
   */
  renew(node: string): void {
    this.loseAll()
    this.current = node
  }

  /** The node's lease runs until `until` (performance.now() ms): past it, no tool of this node may start. */
  lease(until: number): void {
    this.leaseUntil = until
  }

  /** Whether the lease still runs: a node past it may already be dead to the others. */
  get leased(): boolean {
    return performance.now() < this.leaseUntil
  }

  /** The epoch this node holds the session at, or undefined. */
  epochOf(sessionId: string): number | undefined {
    return this.held.get(sessionId)
  }

  /** The session is this node's from `epoch` (it claimed it, or created it). */
  hold(sessionId: string, epoch: number): void {
    this.held.set(sessionId, epoch)
  }

  /** The session is no longer this node's: its listeners stop its work here. */
  lose(sessionId: string): void {
    if (!this.held.delete(sessionId)) return
    for (const listener of this.lost) listener(sessionId)
  }

  /** Every session lost at once (the lease lapsed, or the node stops). */
  loseAll(): void {
    for (const sessionId of [...this.held.keys()]) this.lose(sessionId)
  }

  onLost(listener: (sessionId: string) => void): () => void {
    this.lost.add(listener)
    return () => this.lost.delete(listener)
  }

  /** How many sessions this node holds. */
  get size(): number {
    return this.held.size
  }

  /**
   * The epoch an append to `row`'s session is made under, checked against its locked stream row: a row this
   * transaction inserted is this node's session from epoch 1; otherwise the row must name this node and the
   * epoch it holds, else NOT_OWNER (and a session held at an older epoch is lost). Undefined: a system stream.
   *
   * `anyNode`: every append to the session in the transaction is a client's command, decided on the session
   * as it stands (its expected version is checked after): any node may append it, under the row's epoch, and
   * the owner acts on it when it hears it.
   */
  check(row: LockedStream, anyNode = false): number | undefined {
    if (isSystemStream(row.id)) return undefined
    if (row.inserted) {
      this.hold(row.id, row.epoch)
      return row.epoch
    }
    const held = this.held.get(row.id)
    if (row.owner === this.node && held === row.epoch) return held
    if (held !== undefined) this.lose(row.id)
    if (anyNode) return row.epoch
    throw notOwner(row.id, row.owner)
  }
}

/** A stream's row as an append locks it (src/events/postgres/log.ts). */
export interface LockedStream {
  readonly id: string
  readonly owner: string | null
  readonly epoch: number
  /** made by this very statement: the session is new */
  readonly inserted: boolean
}

/** An append made under an epoch the node has since claimed the session again at (AppendOptions.epoch). */
export function staleEpoch(sessionId: string, epoch: number, held: number): ChronicleError {
  return new ChronicleError(
    'NOT_OWNER',
    `session ${sessionId} was let go of at epoch ${epoch} and is held at epoch ${held} now: what began under ${epoch} records nothing more`,
    { sessionId, epoch, held },
  )
}

export function notOwner(sessionId: string, owner: string | null): ChronicleError {
  return new ChronicleError(
    'NOT_OWNER',
    owner
      ? `session ${sessionId} is run by another node (${owner}): nothing was appended; send it there, or retry once that node is gone`
      : `session ${sessionId} has no owner yet: nothing was appended; retry in a few seconds, once a node has claimed it`,
    { sessionId, owner },
  )
}
