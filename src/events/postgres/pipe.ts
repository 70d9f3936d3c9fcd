import type { Duplex } from 'node:stream'
import type pg from 'pg'

/**
 * One transaction's statements on a pipelined connection (the pool's clients are made with `pipeline: true`):
 * what is sent goes out without waiting for the answers to what was sent before, so statements that need no
 * answer in between share a round trip (docs/ARCHITECTURE.md "Round trips"). What is sent waits in the corked
 * socket and leaves in one write: at the end of the turn in which a statement whose answer is awaited
 * (`query`) is sent, or at `commit`, `settle` or `flushSoon` — a statement sent with `send` alone waits for
 * one of them, so a transaction's last statements leave with its COMMIT.
 *
 * PostgreSQL answers them in order, and once one fails every later one in the transaction fails too, and a
 * COMMIT then answers ROLLBACK without an error: so `settle` (and `commit`) throw the first statement's
 * failure, and a statement sent with `send` is never left unheard.
 */
export class Pipe {
  private readonly pending: Promise<unknown>[] = []
  private failure: { error: unknown } | undefined
  private corked = false
  private flushing = false

  constructor(readonly client: pg.ClientBase) {}

  /** A statement whose answer the caller waits for (its failure is also the transaction's). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string | pg.QueryConfig,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const result = this.write<R>(text, values)
    this.flushSoon()
    return result
  }

  /** A statement nobody waits for, written with the next that is: its failure is thrown by `settle` or `commit`. */
  send(text: string | pg.QueryConfig, values?: unknown[]): void {
    this.write(text, values).catch(() => {})
  }

  /** What was sent leaves at the end of this turn (with what is sent until then). */
  flushSoon(): void {
    if (!this.corked || this.flushing) return
    this.flushing = true
    queueMicrotask(() => this.flush())
  }

  /** Waits for every statement sent; throws the first one's failure. */
  async settle(): Promise<void> {
    this.flush()
    await Promise.allSettled(this.pending.splice(0))
    if (this.failure) throw this.failure.error
  }

  /** COMMIT sent behind what was sent before it: resolves once it and all of them succeeded. */
  async commit(): Promise<void> {
    const committed = this.query('COMMIT')
    await this.settle()
    // a COMMIT of a failed transaction answers ROLLBACK: a failure settle has already thrown
    if ((await committed).command !== 'COMMIT') throw new Error('the transaction was rolled back')
  }

  /** The first failure of a statement sent, if any: what a transaction that failed says. */
  get failed(): { error: unknown } | undefined {
    return this.failure
  }

  private write<R extends pg.QueryResultRow>(
    text: string | pg.QueryConfig,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    this.cork()
    const config: pg.QueryConfig =
      typeof text === 'string' ? { text, values } : { name: text.name, text: text.text, values }
    return this.track(this.client.query<R>(config))
  }

  private track<T>(result: Promise<T>): Promise<T> {
    this.pending.push(result)
    result.catch((error: unknown) => {
      this.failure ??= { error }
    })
    return result
  }

  /** The socket corked: what is written waits until `flush`, and leaves in one write. */
  private cork(): void {
    if (this.corked) return
    const stream = this.stream()
    if (!stream?.cork) return
    this.corked = true
    stream.cork()
  }

  private flush(): void {
    this.flushing = false
    if (!this.corked) return
    this.corked = false
    this.stream()?.uncork()
  }

  private stream(): Duplex | undefined {
    return (this.client as unknown as { connection?: { stream?: Duplex } }).connection?.stream
  }
}
