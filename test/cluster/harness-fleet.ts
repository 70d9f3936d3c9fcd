import type { ServerProcess } from '../crash/server-process.js'
import { type NodeOptions, startNode } from './node-process.js'

/**
 * The cluster harness's nodes: a fixed number of slots, each a real server process (startNode) that the
 * harness kills with -9, freezes (SIGSTOP) and thaws, and starts again. Every start is a new incarnation: a
 * new data directory, a new name (`n<slot>g<generation>`, which its bash jobs write into their markers) and
 * a new cluster id (what `streams.owner` names), so a marker or an owner always says which incarnation.
 */
export interface Incarnation {
  readonly slot: number
  readonly name: string
  /** the node's id in the cluster (GET /cluster `node`): a new one when it rejoins after its lease ran out */
  id: string
  readonly process: ServerProcess
  frozen: boolean
}

export type FleetOptions = Omit<NodeOptions, 'name' | 'commandEnv'> & { readonly nodes: number }

export interface Answer {
  readonly status: number
  readonly json: any
}

export class Fleet {
  readonly slots: (Incarnation | undefined)[]
  private generation = 0

  constructor(private readonly options: FleetOptions) {
    this.slots = Array.from({ length: options.nodes }, () => undefined)
  }

  /** Starts a new incarnation in the slot, retrying while the database is down (a PostgreSQL restart). */
  async start(slot: number): Promise<Incarnation> {
    const name = `n${slot}g${++this.generation}`
    for (let attempt = 1; ; attempt++) {
      try {
        const process = await startNode({ ...this.options, name, commandEnv: { HARNESS_NODE: name } })
        const id = (await call(process.url, this.options.token, 'GET', '/cluster')).json?.node as string
        const node: Incarnation = { slot, name, id, process, frozen: false }
        this.slots[slot] = node
        return node
      } catch (err) {
        if (attempt >= 10) throw err
        await sleep(500)
      }
    }
  }

  /** Nodes that answer: started, not killed, not frozen. */
  up(): Incarnation[] {
    return this.slots.filter((n): n is Incarnation => n !== undefined && !n.frozen)
  }

  byId(id: string | undefined): Incarnation | undefined {
    return this.slots.find((n) => n?.id === id)
  }

  /** Asks each node its id again: a node whose lease ran out (frozen, or the database down) joined again. */
  async refreshIds(): Promise<void> {
    for (const node of this.up()) {
      const r = await call(node.process.url, this.options.token, 'GET', '/cluster')
      if (r.status === 200) node.id = r.json.node
    }
  }

  async kill(node: Incarnation): Promise<void> {
    this.slots[node.slot] = undefined
    if (node.frozen) node.process.child.kill('SIGCONT')
    await node.process.kill('SIGKILL')
  }

  freeze(node: Incarnation): void {
    node.frozen = true
    node.process.child.kill('SIGSTOP')
  }

  thaw(node: Incarnation): void {
    node.process.child.kill('SIGCONT')
    node.frozen = false
  }

  /** Every node killed: what the harness leaves behind is nothing. */
  async stop(): Promise<void> {
    for (const node of this.slots) if (node) await this.kill(node)
  }
}

/** One HTTP call to a node; `status: 0` when it did not answer (dead, frozen past `timeoutMs`). */
export async function call(
  url: string,
  token: string,
  method: 'GET' | 'POST',
  path: string,
  body?: object,
  timeoutMs = 10_000,
): Promise<Answer> {
  try {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body && { 'content-type': 'application/json' }) },
      ...(body && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    })
    const text = await res.text()
    return { status: res.status, json: text ? JSON.parse(text) : undefined }
  } catch (err) {
    return { status: 0, json: { code: 'UNREACHABLE', message: String(err) } }
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
