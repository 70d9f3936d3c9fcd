import type { ChildProcessWithoutNullStreams } from 'node:child_process'

/**
 * JSON-RPC 2.0 over a language server's stdio, with LSP's `Content-Length` framing: requests with
 * their replies, notifications both ways, and the few requests servers send a client (answered with
 * nothing: this client has no configuration, and registrations change nothing here). A reply that never
 * comes is the caller's deadline's business; the process ending fails every request in flight.
 */

type Handler = (params: unknown) => void

/** A message's header may not grow without end (a server printing garbage without a blank line). */
const MAX_HEADER = 8192
/** Nor its body (diagnostics of one file are far smaller). */
const MAX_BODY = 64 * 2 ** 20

export class LspConnection {
  private buffer = Buffer.alloc(0)
  private nextId = 1
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private readonly handlers = new Map<string, Handler>()
  private closedWith: Error | undefined

  constructor(private readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.on('data', (chunk: Buffer) => this.receive(chunk))
    child.stdin.on('error', () => undefined) // a dead server: the exit below fails what waits
    child.once('exit', (code, signal) => this.close(new Error(`the language server exited (${signal ?? code})`)))
    child.once('error', (err) => this.close(err))
  }

  get closed(): boolean {
    return this.closedWith !== undefined
  }

  on(method: string, handler: Handler): void {
    this.handlers.set(method, handler)
  }

  request(method: string, params: unknown): Promise<unknown> {
    if (this.closedWith) return Promise.reject(this.closedWith)
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.send({ jsonrpc: '2.0', id, method, params })
    })
  }

  notify(method: string, params: unknown): void {
    if (!this.closedWith) this.send({ jsonrpc: '2.0', method, params })
  }

  private send(message: object): void {
    const body = Buffer.from(JSON.stringify(message))
    this.child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`), body]))
  }

  private receive(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk])
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n')
      if (end < 0) {
        if (this.buffer.length > MAX_HEADER) this.fail('a header without an end')
        return
      }
      const length = /content-length:\s*(\d+)/i.exec(this.buffer.subarray(0, end).toString())?.[1]
      if (length === undefined || Number(length) > MAX_BODY) return this.fail('a message without a valid length')
      const start = end + 4
      if (this.buffer.length < start + Number(length)) return
      const body = this.buffer.subarray(start, start + Number(length)).toString()
      this.buffer = this.buffer.subarray(start + Number(length))
      try {
        this.dispatch(JSON.parse(body) as Record<string, unknown>)
      } catch {
        return this.fail('a message that is not JSON')
      }
    }
  }

  private dispatch(message: Record<string, unknown>): void {
    const { id, method } = message
    if (typeof method === 'string') {
      // a request from the server: answered so it does not wait (configuration: none; the rest: nothing)
      if (id !== undefined) {
        const items = (message.params as { items?: unknown[] } | undefined)?.items
        const result = method === 'workspace/configuration' ? (items ?? []).map(() => null) : null
        this.send({ jsonrpc: '2.0', id, result })
      } else this.handlers.get(method)?.(message.params)
      return
    }
    if (typeof id !== 'number') return
    const waiter = this.pending.get(id)
    if (!waiter) return
    this.pending.delete(id)
    const error = message.error as { message?: string } | undefined
    if (error) waiter.reject(new Error(error.message ?? 'the language server answered with an error'))
    else waiter.resolve(message.result)
  }

  private fail(why: string): void {
    this.close(new Error(`the language server sent ${why}`))
    this.child.kill('SIGKILL')
  }

  private close(err: Error): void {
    if (this.closedWith) return
    this.closedWith = err
    for (const waiter of this.pending.values()) waiter.reject(err)
    this.pending.clear()
  }
}
