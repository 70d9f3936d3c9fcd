import { UsageError, type Args } from './args.js'
import { httpClient } from './client.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle compact <session> [--no-wait]`: asks the server to compact the
 * session (POST /sessions/:id/compact) and, unless --no-wait, follows the
 * session's events until that compaction completed (exit 0) or failed (exit 1).
 */

export async function compactCommand(args: Args, { line: out }: Pick<Terminal, 'line'>, pollMs = 100): Promise<number> {
  const session = args.positionals[0]
  if (!session) throw new UsageError('missing session id')
  const http = httpClient()
  const requested = await http.call('session.compact', { session })
  out(
    `compaction ${requested.compactionId} ${requested.duplicate ? 'already in progress' : 'requested'} (seq ${requested.seq})`,
  )
  if (args.flags.has('no-wait')) return 0
  let after = requested.seq
  for (;;) {
    const page = await http.call('session.history', { session, after, limit: 1000 })
    for (const e of page.events) {
      after = e.seq
      const data = e.data as Record<string, unknown>
      if (data.compactionId !== requested.compactionId) continue
      if (e.type === 'compaction.completed') {
        out(
          `compacted: ~${String(data.tokensBefore)} → ~${String(data.tokensAfter)} tokens (summary ${String(data.summaryMessageId)})`,
        )
        return 0
      }
      if (e.type === 'compaction.failed') {
        out(`compaction failed: ${String(data.error)}`)
        return 1
      }
    }
    if (page.next !== undefined) after = page.next
    else await new Promise((r) => setTimeout(r, pollMs))
  }
}
