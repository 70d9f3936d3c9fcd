import { CrashClient, type WireEvent } from '../crash/ws-client.js'
import { type Fleet, sleep } from './harness-fleet.js'

/**
 * A client of the cluster harness: one WebSocket subscribed to every session (CrashClient), which moves to
 * another node when its node dies and resumes from its last seq there. Across all its connections it must
 * get every event of the log once and in order: a seq it skipped is missed, one it got twice is duplicated.
 */
export class RoamingClient {
  /** the last seq it got */
  last = 0
  missed = 0
  duplicated = 0
  reconnects = 0
  private connection: CrashClient | undefined
  private stopped = false
  private connecting: Promise<void> | undefined

  constructor(
    private readonly fleet: Fleet,
    private readonly token: string,
    private readonly pick: <T>(items: readonly T[]) => T,
    private readonly onEvent: (e: WireEvent) => void,
  ) {}

  /** Connects to `slot`'s node (or any node up), and again to another whenever the connection ends. */
  connect(slot?: number): Promise<void> {
    this.connecting = this.attach(slot)
    return this.connecting
  }

  private async attach(slot?: number): Promise<void> {
    while (!this.stopped) {
      const up = this.fleet.up()
      const node = (slot !== undefined && up.find((n) => n.slot === slot)) || (up.length > 0 && this.pick(up))
      slot = undefined
      if (!node) {
        await sleep(100)
        continue
      }
      let client: CrashClient | undefined
      try {
        client = await CrashClient.connect(node.process.url, this.token, this.last, (e) => this.take(e))
        this.connection = client
        await client.subscribeAll()
        const connected = client
        void connected.closed.then(() => {
          this.duplicated += connected.duplicates
          if (this.connection === connected) this.connection = undefined
          if (!this.stopped) {
            this.reconnects++
            void this.connect()
          }
        })
        return
      } catch {
        client?.close() // a subscription the node refused: this connection is done with
        await sleep(100) // the node died (or is starting): another
      }
    }
  }

  private take(e: WireEvent): void {
    if (e.seq > this.last + 1) this.missed += e.seq - this.last - 1
    this.last = e.seq
    this.onEvent(e)
  }

  /** Waits until it has heard up to `head` (false when `timeoutMs` passes first). */
  async caughtUp(head: number, timeoutMs: number): Promise<boolean> {
    const end = Date.now() + timeoutMs
    while (this.last < head) {
      if (Date.now() > end) return false
      await sleep(50)
    }
    return true
  }

  async close(): Promise<void> {
    this.stopped = true
    await this.connecting
    const client = this.connection
    if (client) {
      client.close()
      await client.closed
    }
  }
}
