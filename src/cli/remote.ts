import { resolve } from 'node:path'
import type { Session } from '../projections/model.js'
import { flag, intFlag, UsageError, type Args } from './args.js'
import { HttpClient, serverInfo, WsClient } from './client.js'
import { renderEventLine, renderSessionRow, renderTranscript, type StateView, type WireEvent } from './render.js'

/** Client commands that talk to a running server: sessions, show, events, fork. */

type Out = (line: string) => void

function need(args: Args, what: string): string {
  const v = args.positionals[0]
  if (!v) throw new UsageError(`missing ${what}`)
  return v
}

export async function sessions(args: Args, out: Out): Promise<number> {
  const http = new HttpClient(serverInfo())
  let cursor: string | undefined
  let n = 0
  do {
    const q = new URLSearchParams({
      limit: '200',
      ...(args.flags.has('archived') && { archived: 'true' }),
      ...(cursor && { cursor }),
    })
    const page = await http.request<{ sessions: Session[]; cursor?: string }>('GET', `/sessions?${q}`)
    for (const s of page.sessions) out(renderSessionRow(s))
    n += page.sessions.length
    cursor = page.cursor
  } while (cursor)
  if (n === 0) out('(no sessions)')
  return 0
}

export async function show(args: Args, out: Out): Promise<number> {
  const id = need(args, 'session id')
  const at = intFlag(args, 'at')
  const state = await new HttpClient(serverInfo()).request<StateView>(
    'GET',
    `/sessions/${encodeURIComponent(id)}/state${at === undefined ? '' : `?at=${at}`}`,
  )
  out(renderTranscript(state))
  return 0
}

export async function events(args: Args, out: Out): Promise<number> {
  const id = need(args, 'session id')
  let after = intFlag(args, 'after') ?? 0
  const http = new HttpClient(serverInfo())
  for (;;) {
    const page = await http.request<{ events: WireEvent[]; next?: number }>(
      'GET',
      `/sessions/${encodeURIComponent(id)}/events?after=${after}&limit=1000`,
    )
    for (const e of page.events) out(renderEventLine(e))
    const last = page.events.at(-1)
    if (last) after = last.seq
    if (page.next === undefined) break
    after = page.next
  }
  if (!args.flags.has('follow')) return 0
  const interrupted = new Promise<number>((resolve) => process.once('SIGINT', () => resolve(0)))
  // History came over HTTP; from its last seq on, the WebSocket subscription continues without a gap.
  const ws = await WsClient.connect(serverInfo())
  const closed = new Promise<number>((resolve) => (ws.onClose = () => resolve(1)))
  ws.onFrame = (frame) => {
    if (frame.type !== 'event') return
    const e = frame.event as { type: string; data: Record<string, unknown>; at: string }
    out(renderEventLine({ seq: frame.seq as number, version: frame.version as number, ...e }))
  }
  await ws.call('subscribe', { sessions: [id], after })
  const code = await Promise.race([interrupted, closed])
  ws.close()
  return code
}

export async function forkCommand(args: Args, out: Out): Promise<number> {
  const id = need(args, 'session id')
  const at = intFlag(args, 'at')
  if (at === undefined) throw new UsageError('fork needs --at <seq>')
  const title = flag(args, 'title')
  const dir = flag(args, 'dir')
  if (args.flags.get('dir') === true) throw new UsageError('--dir needs a path')
  // The server checks the directory on its own file system: send it absolute.
  const directory = dir === undefined ? undefined : resolve(dir)
  const { session } = await new HttpClient(serverInfo()).request<{ session: Session }>(
    'POST',
    `/sessions/${encodeURIComponent(id)}/fork`,
    {
      at,
      ...(title && { title }),
      ...(directory && { directory }),
    },
  )
  out(`forked ${id} at seq ${at} → ${session.id}${directory ? ` in ${directory}` : ''}`)
  return 0
}
