import WebSocket from 'ws'

/**
 * The harness's WebSocket client: commands with ids (each gets one reply or
 * is lost with the connection), and one subscription to every session whose
 * events must continue the client's cursor exactly — `seq === cursor + 1` —
 * across every restart. Anything else is counted as a gap or a duplicate.
 */

export interface WireEvent {
  readonly seq: number
  readonly session: string
  readonly version: number
  readonly event: { readonly type: string; readonly data: Record<string, unknown> }
}

export interface Reply {
  readonly result?: Record<string, unknown>
  readonly error?: { readonly code: string; readonly message: string }
}

export class CrashClient {
  gaps = 0
  duplicates = 0
  private n = 0
  private readonly waiting = new Map<string, (r: Reply | undefined) => void>()
  private caughtUp: (() => void) | undefined
  readonly closed: Promise<void>

  private constructor(
    private readonly ws: WebSocket,
    public cursor: number,
    private readonly onEvent: (e: WireEvent) => void,
  ) {
    this.closed = new Promise((resolve) => ws.once('close', () => resolve()))
    ws.on('message', (data) => this.onFrame(JSON.parse(String(data)) as Record<string, unknown>))
    ws.on('error', () => undefined)
    void this.closed.then(() => {
      for (const resolve of this.waiting.values()) resolve(undefined)
      this.waiting.clear()
    })
  }

  static async connect(
    url: string,
    token: string,
    cursor: number,
    onEvent: (e: WireEvent) => void,
  ): Promise<CrashClient> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`, { headers: { authorization: `Bearer ${token}` } })
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    return new CrashClient(ws, cursor, onEvent)
  }

  /** Subscribes to every session after the cursor; resolves once the backlog is delivered. */
  async subscribeAll(): Promise<void> {
    const caughtUp = new Promise<void>((resolve) => {
      this.caughtUp = resolve
    })
    const reply = await this.call('subscribe', { sessions: '*', after: this.cursor })
    if (!reply?.result) throw new Error(`subscribe failed: ${JSON.stringify(reply?.error)}`)
    await Promise.race([caughtUp, this.closed])
  }

  /** One command; undefined when the connection died before its reply (not acknowledged). */
  call(method: string, params?: Record<string, unknown>): Promise<Reply | undefined> {
    if (this.ws.readyState !== WebSocket.OPEN) return Promise.resolve(undefined)
    const id = `h${++this.n}`
    return new Promise((resolve) => {
      this.waiting.set(id, resolve)
      this.ws.send(JSON.stringify({ id, method, ...(params && { params }) }))
    })
  }

  close(): void {
    this.ws.terminate()
  }

  private onFrame(frame: Record<string, unknown>): void {
    if (frame['type'] === 'event') {
      const e = frame as unknown as WireEvent
      if (e.seq <= this.cursor) this.duplicates++
      else {
        if (e.seq !== this.cursor + 1) this.gaps++
        this.cursor = e.seq
        this.onEvent(e)
      }
      return
    }
    if (frame['type'] === 'caught-up') {
      this.caughtUp?.()
      return
    }
    const id = frame['id']
    if (typeof id === 'string' && this.waiting.has(id)) {
      const resolve = this.waiting.get(id)
      this.waiting.delete(id)
      resolve?.(frame as Reply)
    }
  }
}
