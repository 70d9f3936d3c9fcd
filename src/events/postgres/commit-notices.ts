import pg from 'pg'

/**
 * How a node of a cluster hears the other nodes' commits (docs/CLUSTER.md
 * "Live events across nodes"). A connection of its own LISTENs on
 * `chronicle_log`. A node that committed says so with one NOTIFY, sent from
 * this connection after the commit: never inside the append, where it would
 * serialise every commit on the database's notification queue. The first
 * commit is told at once; those that follow within NOTIFY_EVERY_MS share one
 * notice when that time is up. A notice wakes the log, which
 * reads what committed after what it last heard (src/events/postgres/log.ts).
 * A poll every POLL_MS does the same for notices lost with a connection or a
 * restart: an idle node costs one query a second.
 */

const CHANNEL = 'chronicle_log'
const NOTIFY_EVERY_MS = 2
export const POLL_MS = 1_000

export class CommitNotices {
  private client: pg.Client | undefined
  private connecting = false
  private closed = false
  /** while a notice's NOTIFY_EVERY_MS runs: the next notice's time, and whether a commit waits for it */
  private notifying: NodeJS.Timeout | undefined
  private pending = false
  private readonly poll: NodeJS.Timeout

  constructor(
    private readonly url: string,
    /** read what committed since the last commit heard */
    private readonly wake: () => void,
    pollMs = POLL_MS,
  ) {
    this.poll = setInterval(wake, pollMs)
    this.poll.unref()
    this.connect()
  }

  /**
   * A commit made here: the other nodes are told at once, unless a notice went out less than NOTIFY_EVERY_MS
   * ago; then once when that time is up, for every commit made meanwhile (a waiting reader reads them all).
   */
  committed(): void {
    if (!this.client) return
    if (this.notifying) {
      this.pending = true
      return
    }
    this.notify()
  }

  private notify(): void {
    this.pending = false
    this.client?.query(`NOTIFY ${CHANNEL}`).catch(() => {}) // lost: the others' poll reads it
    this.notifying = setTimeout(() => {
      this.notifying = undefined
      if (this.pending) this.notify()
    }, NOTIFY_EVERY_MS)
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.poll)
    clearTimeout(this.notifying)
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }

  private connect(): void {
    if (this.closed || this.connecting) return
    this.connecting = true
    const client = new pg.Client({ connectionString: this.url })
    client.on('error', () => {}) // said by 'end', which connects again
    client.on('notification', (notice) => {
      if (notice.processId !== (client as unknown as { processID: number }).processID) this.wake() // not its own
    })
    client.on('end', () => {
      if (this.client === client) this.client = undefined
      if (!this.closed) setTimeout(() => this.connect(), POLL_MS).unref()
    })
    client
      .connect()
      .then(() => client.query(`LISTEN ${CHANNEL}`))
      .then(
        () => {
          if (this.closed) return void client.end().catch(() => {})
          this.client = client
          this.wake() // what committed while nobody listened
        },
        () => void client.end().catch(() => {}),
      )
      .finally(() => {
        this.connecting = false
      })
  }
}
