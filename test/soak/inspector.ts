import { writeFileSync } from 'node:fs'
import WebSocket from 'ws'

/**
 * A client of a child process's V8 inspector (started with
 * `--inspect=127.0.0.1:0`): forces a full garbage collection and reads the
 * heap used after it, and writes heap snapshots — what the soak measures,
 * taken from the real server process without any code of its own.
 */
export class Inspector {
  private next = 1
  private readonly waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>()
  private chunks: string[] = []

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const msg = JSON.parse(String(raw)) as {
        id?: number
        method?: string
        params?: { chunk?: string }
        result?: unknown
        error?: { message: string }
      }
      if (msg.method === 'HeapProfiler.addHeapSnapshotChunk') this.chunks.push(msg.params?.chunk ?? '')
      if (msg.id === undefined) return
      const w = this.waiting.get(msg.id)
      this.waiting.delete(msg.id)
      if (msg.error) w?.reject(new Error(msg.error.message))
      else w?.resolve(msg.result)
    })
    ws.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error('inspector closed'))
      this.waiting.clear()
    })
  }

  /** Connects to the address the child printed: `Debugger listening on ws://…`. */
  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url)
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject))
    const inspector = new Inspector(ws)
    await inspector.send('HeapProfiler.enable')
    return inspector
  }

  private send<T>(method: string, params: object = {}): Promise<T> {
    const id = this.next++
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.ws.send(JSON.stringify({ id, method, params }))
    })
  }

  /** Bytes of the JavaScript heap in use right after a full, forced collection. */
  async heapUsedAfterGc(): Promise<number> {
    await this.send('HeapProfiler.collectGarbage')
    const { usedSize } = await this.send<{ usedSize: number }>('Runtime.getHeapUsage')
    return usedSize
  }

  /** A heap snapshot (for DevTools or ../shared/tools/heap-diff.py) written to `file`. */
  async snapshot(file: string): Promise<void> {
    this.chunks = []
    await this.send('HeapProfiler.takeHeapSnapshot', { reportProgress: false })
    writeFileSync(file, this.chunks.join(''))
    this.chunks = []
  }

  close(): void {
    this.ws.close()
  }
}
