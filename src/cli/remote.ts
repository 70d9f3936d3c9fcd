import { resolve } from 'node:path'
import { flag, intFlag, UsageError, type Args } from './args.js'
import { connect, httpClient } from './client.js'
import { renderEventLine, renderSessionRow, renderTranscript } from './render.js'
import type { Terminal } from './terminal.js'

/** Client commands that talk to a running server: sessions, show, events, fork. */

function need(args: Args, what: string): string {
  const v = args.positionals[0]
  if (!v) throw new UsageError(`missing ${what}`)
  return v
}

export async function sessions(args: Args, term: Terminal): Promise<number> {
  const http = httpClient()
  let cursor: string | undefined
  let n = 0
  do {
    const page = await http.call('session.list', {
      limit: 200,
      ...(args.flags.has('archived') && { archived: true }),
      ...(cursor && { cursor }),
    })
    for (const s of page.sessions) term.line(renderSessionRow(s, term.paint))
    n += page.sessions.length
    cursor = page.cursor
  } while (cursor)
  if (n === 0) term.line('(no sessions)')
  return 0
}

export async function show(args: Args, term: Terminal): Promise<number> {
  const session = need(args, 'session id')
  const at = intFlag(args, 'at')
  const state = await httpClient().call('session.state', { session, ...(at !== undefined && { at }) })
  term.line(renderTranscript(state, term.paint))
  return 0
}

export async function events(args: Args, term: Terminal): Promise<number> {
  const session = need(args, 'session id')
  let after = intFlag(args, 'after') ?? 0
  const http = httpClient()
  for (;;) {
    const page = await http.call('session.history', { session, after, limit: 1000 })
    for (const e of page.events) term.line(renderEventLine(e, term.paint))
    const last = page.events.at(-1)
    if (last) after = last.seq
    if (page.next === undefined) break
    after = page.next
  }
  if (!args.flags.has('follow')) return 0
  // History came over HTTP; from its last seq on, the subscription continues without a gap, across reconnects.
  let lost: (code: number) => void = () => {}
  const ended = new Promise<number>((resolve) => {
    lost = resolve
    process.once('SIGINT', () => resolve(0))
  })
  const socket = await connect({
    onStatus: (status, reason) => {
      if (status === 'reconnecting') process.stderr.write(`(connection lost: ${reason}; reconnecting…)\n`)
      if (status === 'closed') lost(1)
    },
  })
  await socket.subscribe({ sessions: [session], after }, (frame) =>
    term.line(renderEventLine({ seq: frame.seq, version: frame.version, ...frame.event }, term.paint)),
  )
  const code = await ended
  socket.close()
  return code
}

export async function forkCommand(args: Args, term: Terminal): Promise<number> {
  const session = need(args, 'session id')
  const at = intFlag(args, 'at')
  if (at === undefined) throw new UsageError('fork needs --at <seq>')
  const title = flag(args, 'title')
  // The server checks the directory on its own file system: send it absolute.
  const dir = flag(args, 'dir')
  const directory = dir === undefined ? undefined : resolve(dir)
  const { session: child } = await httpClient().call('session.fork', {
    session,
    at,
    ...(title && { title }),
    ...(directory && { directory }),
  })
  term.line(`forked ${session} at seq ${at} → ${child.id}${directory ? ` in ${directory}` : ''}`)
  return 0
}
