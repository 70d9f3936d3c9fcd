import type { Message, Part, Session } from '../projections/model.js'

/** Turning sessions, states and events into terminal text. */

export interface StateView {
  readonly session: Session
  readonly messages: readonly Message[]
  readonly parts: readonly Part[]
  readonly seq: number
}

const oneLine = (s: string, max = 100) => {
  const line = s.replace(/\s+/g, ' ').trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

export function describeInput(input: unknown): string {
  if (input === undefined) return ''
  const json = JSON.stringify(input)
  return oneLine(json ?? '', 80)
}

export function renderPart(part: Part): string | undefined {
  switch (part.type) {
    case 'text':
      return part.text
    case 'reasoning':
      return `(thinking) ${oneLine(part.text, 200)}`
    case 'file':
      return `[file ${part.path ?? part.url ?? ''}]`
    case 'tool': {
      const answer = part.permission
        ? ` (${part.permission.reply === 'reject' ? 'rejected' : `approved ${part.permission.reply}`}${part.permission.by ? ` by ${part.permission.by.name}` : ''})`
        : ''
      const head = `⚙ ${part.tool} ${describeInput(part.input ?? part.rawInput)} — ${part.state}${answer}`
      if (part.state === 'completed') return `${head}: ${oneLine(part.output ?? '')}`
      if (part.state === 'error') return `${head}: ${part.error?.kind} ${oneLine(part.error?.message ?? '')}`
      return head
    }
    case 'subtask':
      return `↳ subtask ${part.childSessionId}${part.outcome ? ` (${part.outcome})` : ''}`
    case 'patch':
      return `± ${part.files.map((f) => `${f.path} ${f.binary ? '(binary)' : `+${f.added ?? 0} -${f.removed ?? 0}`}${f.status === 'modified' ? '' : ` (${f.status})`}`).join(', ')}`
    default:
      return undefined
  }
}

export function renderTranscript(state: StateView): string {
  const { session } = state
  const lines = [`# ${session.title} (${session.id}) at seq ${state.seq} — ${session.status}`]
  if (session.forkedFrom) lines.push(`  forked from ${session.forkedFrom.sessionId} at seq ${session.forkedFrom.seq}`)
  if (session.imported)
    lines.push(`  imported (as ${session.imported.originalId}): read-only; fork it with --dir <path> to continue`)
  const byMessage = new Map<string, Part[]>()
  for (const p of state.parts) byMessage.set(p.messageId, [...(byMessage.get(p.messageId) ?? []), p])
  for (const m of state.messages) {
    lines.push(
      '',
      m.role === 'user' ? `> user${m.by ? ` ${m.by.name}` : ''}` : `< assistant${m.model ? ` (${m.model})` : ''}`,
    )
    for (const p of byMessage.get(m.id) ?? []) {
      const text = renderPart(p)
      if (text !== undefined && text !== '') lines.push(...text.split('\n').map((l) => `  ${l}`))
    }
    if (m.error) lines.push(`  ! ${m.error.kind}: ${m.error.message}`)
  }
  for (const p of session.pendingPermissions)
    lines.push('', `? waiting for permission ${p.permission} ${p.patterns.join(' ')} (${p.requestId})`)
  if (session.lastRun?.error && session.status === 'idle')
    lines.push('', `! run ${session.lastRun.outcome}: ${session.lastRun.error.kind}: ${session.lastRun.error.message}`)
  return lines.join('\n')
}

export function renderSessionRow(s: Session): string {
  return [s.id, s.status.padEnd(7), s.updatedAt.slice(0, 19).replace('T', ' '), oneLine(s.title, 60)].join('  ')
}

export interface WireEvent {
  readonly seq: number
  readonly sessionId?: string
  readonly session?: string
  readonly version: number
  readonly type: string
  readonly data: Record<string, unknown>
  readonly at: string
  readonly inherited?: boolean
}

/** One line per event, for `chronicle events`. */
export function renderEventLine(e: WireEvent): string {
  const data = JSON.stringify(e.data)
  return `${String(e.seq).padStart(7)}  ${e.at.slice(11, 23)}  ${e.type.padEnd(22)} ${oneLine(data, 120)}${e.inherited ? '  (inherited)' : ''}`
}
