import { matcherOf } from '../projections/search/hits.js'
import { parseQuery } from '../projections/search/query.js'

/**
 * A search hit opened (docs/SEARCH.md): the session in time travel at the
 * event where the match first appeared, and the match highlighted in its
 * transcript. The hit is remembered for the tab (sessionStorage) as it is
 * clicked; when the page shows that session at that event, each occurrence
 * of the query's terms in the transcript is a `search-hit` highlight (the
 * CSS Custom Highlight API: no element added, the text untouched) and the
 * first is scrolled into view.
 */

const KEY = 'chronicle.search.hit'

export interface RememberedHit {
  readonly session: string
  readonly seq: number
  readonly q: string
}

export function rememberHit(hit: RememberedHit): void {
  try {
    sessionStorage.setItem(KEY, JSON.stringify(hit))
  } catch {}
}

function remembered(): RememberedHit | undefined {
  try {
    const hit = JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as RememberedHit | null
    return hit ?? undefined
  } catch {
    return undefined
  }
}

/** Highlights the remembered hit's matches once the transcript of `session` at `seq` shows them; the stop function. */
export function highlightHit(session: string, seq: number | null): () => void {
  const hit = remembered()
  const highlights = (globalThis as { CSS?: { highlights?: Map<string, unknown> } }).CSS?.highlights
  const Highlight = (globalThis as { Highlight?: new (...ranges: Range[]) => unknown }).Highlight
  if (!hit || hit.session !== session || hit.seq !== seq || !highlights || !Highlight) return () => {}
  let matcher: RegExp | null
  try {
    matcher = matcherOf(parseQuery(hit.q))
  } catch {
    return () => {}
  }
  if (!matcher) return () => {}
  const pattern = matcher
  let done = false
  const mark = (): boolean => {
    const transcript = document.querySelector('.transcript')
    if (!transcript) return false
    const ranges: Range[] = []
    const walker = document.createTreeWalker(transcript, NodeFilter.SHOW_TEXT)
    for (let node = walker.nextNode(); node && ranges.length < 200; node = walker.nextNode()) {
      const text = node.textContent ?? ''
      pattern.lastIndex = 0
      for (let m = pattern.exec(text); m && ranges.length < 200; m = pattern.exec(text)) {
        if (m[0].length === 0) {
          pattern.lastIndex++
          continue
        }
        const range = document.createRange()
        range.setStart(node, m.index)
        range.setEnd(node, m.index + m[0].length)
        ranges.push(range)
      }
    }
    if (ranges.length === 0) return false
    highlights.set('search-hit', new Highlight(...ranges))
    ;(ranges[0]?.startContainer.parentElement ?? transcript).scrollIntoView({ block: 'center' })
    return true
  }
  // the transcript renders once the state at the seq has come: look again as the page changes, for a while
  const observer = new MutationObserver(() => {
    if (!done && mark()) stop()
  })
  const timer = setTimeout(() => stop(), 10_000)
  const stop = () => {
    done = true
    observer.disconnect()
    clearTimeout(timer)
  }
  if (mark()) stop()
  else observer.observe(document.body, { childList: true, subtree: true, characterData: true })
  return () => {
    stop()
    highlights.delete('search-hit')
  }
}
