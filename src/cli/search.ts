import type { SearchHit, SearchPage } from '../client/protocol.js'
import { type Args, flag, intFlag, UsageError } from './args.js'
import { httpClient } from './client.js'
import { printable } from './render.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle search "<query>" [--json]` (docs/SEARCH.md): every session the
 * token reaches, newest first. Each hit is its session and title, what
 * matched and who, the snippet with the matches marked, and the command that
 * opens the session as it was at that event.
 */
export async function searchCommand(args: Args, term: Terminal): Promise<number> {
  const q = args.positionals.join(' ').trim()
  if (q === '') throw new UsageError('search needs a query: chronicle search "flaky test"')
  const order = flag(args, 'order')
  if (order !== undefined && order !== 'newest' && order !== 'relevance')
    throw new UsageError('--order is newest or relevance')
  const limit = intFlag(args, 'limit')
  const page = await httpClient().call('search', {
    q,
    ...(limit !== undefined && { limit }),
    ...(order !== undefined && { order }),
    ...(args.flags.has('archived') && { archived: true }),
  })
  if (args.flags.has('json')) {
    term.write(`${JSON.stringify(page)}\n`)
    return 0
  }
  for (const hit of page.hits) renderHit(hit, term)
  if (page.hits.length === 0) term.line('(no hits)')
  if (page.cursor) term.line(term.paint('dim', `(more: --limit ${(limit ?? 20) * 2}, or --json for the cursor)`))
  if (page.indexedThrough < page.head) term.line(behind(page))
  return 0
}

function behind(page: SearchPage): string {
  return `(the index has read the log up to seq ${page.indexedThrough} of ${page.head}: what came after is not searched yet)`
}

function renderHit(hit: SearchHit, term: Terminal): void {
  const { paint } = term
  const what = hit.tool ? `${hit.type} ${printable(hit.tool)}` : hit.type
  term.line(
    `${paint('bold', printable(hit.title))} ${paint('dim', hit.session)}  ${what} · ${printable(hit.by)} · ${hit.at.slice(0, 16).replace('T', ' ')} · seq ${hit.firstSeq}`,
  )
  // whitespace to spaces one for one, so the highlights' offsets still hold
  const flat = hit.snippet.replace(/\s/g, ' ')
  let shown = ''
  let at = 0
  for (const [start, end] of hit.highlights) {
    shown += printable(flat.slice(at, start)) + paint('yellow', printable(flat.slice(start, end)))
    at = end
  }
  term.line(`  ${shown}${printable(flat.slice(at))}`)
  term.line(paint('dim', `  chronicle show ${hit.session} --at ${hit.firstSeq}`))
}
