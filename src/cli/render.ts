import type { StateView } from '../client/protocol.js'
import type { Part, Session } from '../projections/fold/model.js'
import type { Terminal } from './terminal.js'

/** Turning sessions, states and events into terminal text (coloured when `paint` colours). */

export type { StateView }
type Paint = Terminal['paint']
const plain: Paint = (_style, text) => text

/**
 * Text that came from the model, a workspace file or a tool, made safe for a
 * terminal: control characters (an escape sequence that would move the
 * cursor, recolour or retitle the screen among them) are shown as `\xNN`,
 * not obeyed. Newlines and tabs stay.
 */
export function printable(text: string): string {
  const escaped = (c: string) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
  return text.replaceAll('\r\n', '\n').replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, escaped)
}

const oneLine = (s: string, max = 100) => {
  const line = printable(s.replace(/\s+/g, ' ').trim())
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}

/**
 * A tool call's input on one line. A value that is itself JSON text (as a
 * doom-loop request once recorded it) is shown decoded, not encoded twice.
 */
export function describeInput(input: unknown): string {
  if (input === undefined) return ''
  if (typeof input === 'string') {
    try {
      const decoded: unknown = JSON.parse(input)
      if (decoded !== null && typeof decoded === 'object') return oneLine(JSON.stringify(decoded), 80)
    } catch {}
    return oneLine(input, 80)
  }
  return oneLine(JSON.stringify(input) ?? '', 80)
}

const STATE_STYLE = { completed: 'green', error: 'red', running: 'yellow', pending: 'yellow' } as const

export function renderPart(part: Part, paint: Paint = plain): string | undefined {
  switch (part.type) {
    case 'text':
      return printable(part.text)
    case 'reasoning':
      return paint('dim', `(thinking) ${oneLine(part.text, 200)}`)
    case 'file':
      return paint('cyan', `[file ${part.path ?? part.url ?? ''}]`)
    case 'tool': {
      const answer = part.permission
        ? ` (${part.permission.reply === 'reject' ? 'rejected' : `approved ${part.permission.reply}`}${part.permission.by ? ` by ${part.permission.by.name}` : ''})`
        : ''
      const state = paint(STATE_STYLE[part.state] ?? 'yellow', part.state)
      const head = `${paint('yellow', '⚙')} ${paint('bold', part.tool)} ${describeInput(part.input ?? part.rawInput)} — ${state}${answer}`
      if (part.state === 'completed') return `${head}: ${paint('dim', oneLine(part.output ?? ''))}`
      if (part.state === 'error') return `${head}: ${part.error?.kind} ${oneLine(part.error?.message ?? '')}`
      return head
    }
    case 'subtask':
      return `↳ subtask ${part.childSessionId}${part.outcome ? ` (${part.outcome})` : ''}`
    case 'patch':
      return `± ${part.files
        .map(
          (f) =>
            `${f.path} ${f.binary ? '(binary)' : `${paint('green', `+${f.added ?? 0}`)} ${paint('red', `-${f.removed ?? 0}`)}`}${f.status === 'modified' ? '' : ` (${f.status})`}`,
        )
        .join(', ')}`
    default:
      return undefined
  }
}

export function renderTranscript(state: StateView, paint: Paint = plain): string {
  const { session } = state
  const lines = [paint('bold', `# ${session.title} (${session.id}) at seq ${state.seq} — ${session.status}`)]
  if (session.forkedFrom) lines.push(`  forked from ${session.forkedFrom.sessionId} at seq ${session.forkedFrom.seq}`)
  if (session.imported)
    lines.push(`  imported (as ${session.imported.originalId}): read-only; fork it with --dir <path> to continue`)
  const byMessage = new Map<string, Part[]>()
  for (const p of state.parts) byMessage.set(p.messageId, [...(byMessage.get(p.messageId) ?? []), p])
  for (const m of state.messages) {
    lines.push(
      '',
      m.role === 'user'
        ? paint(['bold', 'green'], `> user${m.by ? ` ${m.by.name}` : ''}`)
        : paint(['bold', 'cyan'], `< assistant${m.model ? ` (${m.model})` : ''}`),
    )
    for (const p of byMessage.get(m.id) ?? []) {
      const text = renderPart(p, paint)
      if (text !== undefined && text !== '') lines.push(...text.split('\n').map((l) => `  ${l}`))
    }
    if (m.error) lines.push(paint('red', `  ! ${m.error.kind}: ${m.error.message}`))
  }
  for (const p of session.pendingPermissions)
    lines.push('', paint('yellow', `? waiting for permission ${p.permission} ${p.patterns.join(' ')} (${p.requestId})`))
  if (session.lastRun?.error && session.status === 'idle')
    lines.push(
      '',
      paint('red', `! run ${session.lastRun.outcome}: ${session.lastRun.error.kind}: ${session.lastRun.error.message}`),
    )
  return lines.join('\n')
}

export function renderSessionRow(s: Session, paint: Paint = plain): string {
  const status = s.status.padEnd(7)
  return [
    s.id,
    s.status === 'idle' ? paint('dim', status) : paint('yellow', status),
    s.updatedAt.slice(0, 19).replace('T', ' '),
    oneLine(s.title, 60),
  ].join('  ')
}

export interface EventLine {
  readonly seq: number
  readonly version: number
  readonly type: string
  readonly data: Record<string, unknown>
  readonly at: string
  readonly inherited?: boolean
}

/** One line per event, for `chronicle events`. */
export function renderEventLine(e: EventLine, paint: Paint = plain): string {
  const data = JSON.stringify(e.data)
  return `${paint('dim', String(e.seq).padStart(7))}  ${e.at.slice(11, 23)}  ${paint('cyan', e.type.padEnd(22))} ${oneLine(data, 120)}${e.inherited ? paint('dim', '  (inherited)') : ''}`
}

/** A unified diff, its added lines green and removed ones red. */
export function paintDiff(patch: string, paint: Paint = plain): string {
  return printable(patch)
    .split('\n')
    .map((l) =>
      l.startsWith('+++') || l.startsWith('---')
        ? paint('bold', l)
        : l.startsWith('+')
          ? paint('green', l)
          : l.startsWith('-')
            ? paint('red', l)
            : l.startsWith('@@')
              ? paint('cyan', l)
              : l,
    )
    .join('\n')
}
