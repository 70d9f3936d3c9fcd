import type { ChronicleSocket, HistoryEvent } from '../client/index.js'

/**
 * A session's events as JSON lines, read from `session.history` pages of
 * 5,000 (the HTTP API has no export route): one event per line with its
 * envelope, a fork's inherited prefix included (`inherited: true`). It is
 * not `chronicle export`'s file — the protocol gives no chain hashes and no
 * blobs — so it reads like `chronicle events`, and `chronicle import` refuses it.
 */
export async function eventsJsonl(
  socket: Pick<ChronicleSocket, 'call'>,
  session: string,
  onProgress?: (events: number) => void,
): Promise<string> {
  const lines: string[] = []
  let after = 0
  for (;;) {
    const page: { events: HistoryEvent[]; next?: number } = await socket.call('session.history', {
      session,
      after,
      limit: 5000,
    })
    for (const e of page.events) lines.push(JSON.stringify(e))
    onProgress?.(lines.length)
    if (page.next === undefined || page.events.length === 0) break
    after = page.next
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : ''
}

/** Offers text as a file download (an object URL: no server route, nothing inline). */
export function download(name: string, text: string, type = 'application/x-ndjson'): void {
  const url = URL.createObjectURL(new Blob([text], { type }))
  const a = document.createElement('a')
  a.href = url
  a.download = name
  a.hidden = true
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}
