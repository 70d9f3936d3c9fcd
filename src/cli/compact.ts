import { UsageError, type Args } from './args.js'
import { HttpClient, serverInfo } from './client.js'

/**
 * `chronicle compact <session> [--no-wait]`: asks the server to compact the
 * session (POST /sessions/:id/compact) and, unless --no-wait, follows the
 * session's events until that compaction completed (exit 0) or failed (exit 1).
 */

type Out = (line: string) => void

interface WireEvent {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
}

export async function compactCommand(args: Args, out: Out, pollMs = 100): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('missing session id')
  const http = new HttpClient(serverInfo())
  const session = encodeURIComponent(id)
  const requested = await http.request<{ compactionId: string; seq: number; duplicate: boolean }>(
    'POST',
    `/sessions/${session}/compact`,
  )
  out(
    `compaction ${requested.compactionId} ${requested.duplicate ? 'already in progress' : 'requested'} (seq ${requested.seq})`,
  )
  if (args.flags.has('no-wait')) return 0
  let after = requested.seq
  for (;;) {
    const page = await http.request<{ events: WireEvent[]; next?: number }>(
      'GET',
      `/sessions/${session}/events?after=${after}&limit=1000`,
    )
    for (const e of page.events) {
      after = e.seq
      if (e.data.compactionId !== requested.compactionId) continue
      if (e.type === 'compaction.completed') {
        out(
          `compacted: ~${String(e.data.tokensBefore)} → ~${String(e.data.tokensAfter)} tokens (summary ${String(e.data.summaryMessageId)})`,
        )
        return 0
      }
      if (e.type === 'compaction.failed') {
        out(`compaction failed: ${String(e.data.error)}`)
        return 1
      }
    }
    if (page.next !== undefined) after = page.next
    else await new Promise((r) => setTimeout(r, pollMs))
  }
}
