import type { Message, Part, SessionView } from '../../projections/fold/model.js'
import { partsByMessage, visibleMessages } from '../loop/chat-messages.js'
import { estimateMessage, estimateTokens } from './tokens.js'

/**
 * Which history a compaction summarises (the head) and which it keeps
 * verbatim (the tail), and the head written as a plain transcript for the
 * compaction agent. The tail always starts at a user message, so a tool call
 * is never separated from its result and every kept turn is whole.
 */

export interface Split {
  readonly head: readonly Message[]
  readonly tail: readonly Message[]
  /** the first kept message (a user message); undefined when everything is summarised */
  readonly tailStartMessageId?: string
}

export function splitHistory(view: SessionView, tailBudget: number): Split {
  const visible = visibleMessages(view)
  const parts = partsByMessage(view)
  const sizes = visible.map((m) => estimateMessage(parts.get(m.id) ?? []))
  const firstReal = visible.findIndex((m) => !m.summary)
  let start = visible.length // no tail
  let tokens = 0
  for (let i = visible.length - 1; i >= 0; i--) {
    tokens += sizes[i] as number
    if (tokens > tailBudget) break
    const m = visible[i] as Message
    // Keep at least one message in the head: a compaction must summarise something.
    if (m.role === 'user' && !m.summary && firstReal >= 0 && i > firstReal) start = i
  }
  const tail = visible.slice(start)
  return { head: visible.slice(0, start), tail, ...(tail[0] && { tailStartMessageId: tail[0].id }) }
}

/** One line of the transcript, oldest first. */
interface Entry {
  readonly label: string
  text: string
  readonly kind: 'summary' | 'user' | 'assistant' | 'call' | 'result'
}

export function transcriptEntries(view: SessionView, head: readonly Message[]): Entry[] {
  const parts = partsByMessage(view)
  const out: Entry[] = []
  for (const m of head) {
    const own: readonly Part[] = parts.get(m.id) ?? []
    if (m.summary) {
      out.push({ label: '[Previous summary]', text: textOf(own), kind: 'summary' })
      continue
    }
    for (const p of own) {
      if (p.type === 'text' && p.text.length > 0) {
        out.push(
          m.role === 'user'
            ? { label: '[User]', text: p.text, kind: 'user' }
            : { label: '[Assistant]', text: p.text, kind: 'assistant' },
        )
      } else if (p.type === 'file') {
        out.push({
          label: '[User attached file]',
          text: p.filename ?? p.path ?? p.url?.slice(0, 80) ?? 'unnamed',
          kind: 'user',
        })
      } else if (p.type === 'tool') {
        out.push({ label: '[Assistant tool call]', text: `${p.tool}(${p.rawInput})`, kind: 'call' })
        const result =
          p.state === 'completed'
            ? (p.output ?? '')
            : `error (${p.error?.kind ?? 'interrupted'}): ${p.error?.message ?? 'no result'}`
        out.push({ label: '[Tool result]', text: result, kind: 'result' })
      }
    }
  }
  return out
}

const render = (entries: readonly Entry[]) => entries.map((e) => `${e.label}: ${e.text}`).join('\n\n')

/**
 * The transcript within `target` tokens: long tool results are cut first,
 * then the oldest entries are dropped (a previous summary is kept), and as a
 * last resort every entry is cut. Never empty when there is history.
 */
export function fitTranscript(
  entries: readonly Entry[],
  target: number,
): { text: string; tokens: number; omitted: number } {
  const list = entries.map((e) => ({ ...e }))
  // Sizes are kept as a running character count: fitting a long head stays linear.
  const width = (e: Entry) => e.label.length + 2 + e.text.length + 2
  let chars = list.reduce((n, e) => n + width(e), 0)
  const fits = () => Math.ceil(chars / 4) <= target
  const cut = (e: Entry, cap: number, note: string) => {
    if (e.text.length <= cap) return
    chars -= width(e)
    e.text = `${e.text.slice(0, cap)} … [${note}]`
    chars += width(e)
  }
  for (const cap of [8000, 2000, 400]) {
    if (fits()) break
    for (const e of list) if (e.kind === 'result') cut(e, cap, `${e.text.length - cap} characters cut`)
  }
  let omitted = 0
  const keep: Entry[] = []
  for (const [i, e] of list.entries()) {
    // Drop the oldest entries (never a previous summary, never the last one) until the rest fits.
    if (!fits() && e.kind !== 'summary' && i < list.length - 1) {
      chars -= width(e)
      omitted++
      continue
    }
    keep.push(e)
  }
  if (!fits()) {
    const cap = Math.max(200, Math.floor((target * 4) / Math.max(1, keep.length)) - 40)
    for (const e of keep) cut(e, cap, 'cut')
  }
  const body = render(keep)
  const text = omitted > 0 ? `[… ${omitted} earlier entries omitted to fit the compaction request …]\n\n${body}` : body
  return { text, tokens: estimateTokens(text), omitted }
}

function textOf(parts: readonly Part[]): string {
  return parts.map((p) => (p.type === 'text' ? p.text : '')).join('')
}
