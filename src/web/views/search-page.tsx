import { useEffect, useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, SearchHit, SearchPage as Page } from '../../client/index.js'
import { rememberHit } from '../search-highlight.js'
import { atHash } from '../route.js'
import { ErrorNote, formatTime, plural, useAction } from '../ui.js'

/**
 * Search results (`#/search/<q>`, docs/SEARCH.md): every session the viewer
 * reaches, newest first. Each hit opens its session in time travel at the
 * event where the match first appeared (`#/s/<id>@<seq>`), where the match is
 * highlighted in the transcript (search-highlight.ts). The snippet's matches
 * are <mark>s; every text is the page's own text node, never HTML.
 */
export function SearchPage({ socket, q }: { socket: ChronicleSocket; q: string }) {
  const [page, setPage] = useState<Page | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const heading = useRef<HTMLHeadingElement>(null)

  useEffect(() => heading.current?.focus(), [])
  useEffect(() => {
    let alive = true
    setPage(undefined)
    setError(undefined)
    if (q.trim() === '') return
    socket.call('search', { q }).then(
      (answer) => alive && setPage(answer),
      (e) => alive && setError(e),
    )
    return () => {
      alive = false
    }
  }, [socket, q])

  const more = useAction(async () => {
    if (!page?.cursor) return
    const next = await socket.call('search', { q, cursor: page.cursor })
    setPage({ ...next, hits: [...page.hits, ...next.hits] })
  })

  return (
    <div class="search-page">
      <h1 ref={heading} tabIndex={-1}>
        Search
      </h1>
      {q.trim() === '' && (
        <p class="empty">Type words, a "phrase", prefix*, or a filter (tool:bash, by:alice) above.</p>
      )}
      <ErrorNote error={error} />
      {page === undefined && !error && q.trim() !== '' && <p aria-busy="true">Searching…</p>}
      {page && (
        <p aria-live="polite">
          {page.hits.length === 0 ? 'No hits' : plural(page.hits.length, 'hit')} for <q>{q}</q>
          {page.indexedThrough < page.head &&
            ` (the index has read up to event ${page.indexedThrough} of ${page.head}: newer events are not searched yet)`}
        </p>
      )}
      {page && page.hits.length > 0 && (
        <ol class="search-hits">
          {page.hits.map((hit) => (
            <Hit key={`${hit.session} ${hit.key}`} hit={hit} q={q} />
          ))}
        </ol>
      )}
      {page?.cursor && (
        <button type="button" disabled={more.busy} onClick={() => void more.start()}>
          Show more hits
        </button>
      )}
      <ErrorNote error={more.error} />
    </div>
  )
}

function Hit({ hit, q }: { hit: SearchHit; q: string }) {
  const pieces: { text: string; mark: boolean }[] = []
  let at = 0
  for (const [start, end] of hit.highlights) {
    if (start > at) pieces.push({ text: hit.snippet.slice(at, start), mark: false })
    pieces.push({ text: hit.snippet.slice(start, end), mark: true })
    at = end
  }
  if (at < hit.snippet.length) pieces.push({ text: hit.snippet.slice(at), mark: false })
  return (
    <li class="search-hit">
      <a
        href={atHash(hit.session, hit.firstSeq)}
        class="search-hit-link"
        onClick={() => rememberHit({ session: hit.session, seq: hit.firstSeq, q })}
      >
        {hit.title}
      </a>
      <span class="row-facts">
        {hit.type}
        {hit.tool ? ` ${hit.tool}` : ''} · {hit.by} · <time dateTime={hit.at}>{formatTime(hit.at)}</time> · event{' '}
        {hit.firstSeq}
      </span>
      <p class="snippet">{pieces.map((p, i) => (p.mark ? <mark key={i}>{p.text}</mark> : p.text))}</p>
    </li>
  )
}
