import type { ElicitationAsk } from './elicit.js'
import { describeInput, paintDiff, printable } from './render.js'
import { StreamWrapper, type Terminal } from './terminal.js'

/**
 * Renders one session's live events as they stream: text as it arrives
 * (word-wrapped on a terminal), tool calls with their states, retries and
 * errors. Permission requests, tool servers' questions, their ends and run
 * ends are handed to the caller (chat prompts; run answers by its patterns
 * and declines questions; demo answers).
 */

export interface LiveEvent {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
}

export interface PermissionAsk {
  readonly requestId: string
  readonly permission: string
  readonly patterns: string[]
  readonly metadata?: Record<string, unknown>
}

export interface LiveHandlers {
  readonly onPermission?: (request: PermissionAsk) => void
  /** a request is no longer open: replied (by anyone) or settled by a cancel */
  readonly onPermissionClosed?: (requestId: string) => void
  /** a tool server's question (its message is shown by the renderer) */
  readonly onElicitation?: (question: ElicitationAsk) => void
  /** a question is no longer open: answered (by anyone) or closed by the runtime */
  readonly onElicitationClosed?: (elicitationId: string) => void
  readonly onRunFinished?: (outcome: string, seq: number, error?: { kind: string; message: string }) => void
}

const ANSWERED: Record<string, string> = { accept: 'answered', decline: 'declined', cancel: 'cancelled' }

export class LiveRenderer {
  private readonly tools = new Map<string, string>()
  private midLine = false
  private readonly text: StreamWrapper

  constructor(
    private readonly term: Pick<Terminal, 'write' | 'paint' | 'width'>,
    private readonly h: LiveHandlers = {},
  ) {
    this.text = new StreamWrapper(term.write, term.width)
  }

  private line(text: string): void {
    this.text.end()
    this.term.write(`${this.midLine ? '\n' : ''}${text}\n`)
    this.midLine = false
  }

  handle(e: LiveEvent): void {
    const d = e.data
    const paint = this.term.paint
    switch (e.type) {
      case 'message.created':
        if (d.role === 'assistant')
          this.line(paint(['bold', 'cyan'], `< assistant${d.model ? ` (${String(d.model)})` : ''}`))
        return
      case 'text.delta':
        this.text.write(printable(String(d.text)))
        this.midLine = !String(d.text).endsWith('\n')
        return
      case 'text.ended':
        this.text.end()
        if (this.midLine) this.term.write('\n')
        this.midLine = false
        return
      case 'reasoning.started':
        this.line(paint('dim', '  (thinking…)'))
        return
      case 'tool.input.started':
        this.tools.set(String(d.partId), String(d.tool))
        this.line(`  ${paint('yellow', '⚙')} ${paint('bold', String(d.tool))} — pending`)
        return
      case 'tool.called':
        this.tools.set(String(d.partId), String(d.tool))
        this.line(`  ${paint('yellow', '⚙')} ${paint('bold', String(d.tool))} ${describeInput(d.input)} — running`)
        return
      case 'tool.network':
        this.line(`    ${paint(d.allowed ? 'dim' : 'red', networkLine(d))}`)
        return
      case 'tool.completed': {
        const first =
          String(d.output)
            .split('\n')
            .find((l) => l.trim() !== '') ?? ''
        this.line(
          `  ${paint('green', '✓')} ${this.tools.get(String(d.partId)) ?? 'tool'} — completed: ${paint('dim', printable(first.slice(0, 100)))}`,
        )
        return
      }
      case 'tool.failed': {
        const err = d.error as { kind: string; message: string }
        this.line(
          `  ${paint('red', '✗')} ${this.tools.get(String(d.partId)) ?? 'tool'} — ${err.kind}: ${printable(err.message.split('\n')[0] ?? '')}`,
        )
        return
      }
      case 'permission.requested': {
        const metadata = d.metadata as Record<string, unknown> | undefined
        if (typeof metadata?.diff === 'string') this.line(paintDiff(metadata.diff.trimEnd(), paint))
        this.h.onPermission?.({
          requestId: String(d.requestId),
          permission: String(d.permission),
          patterns: (d.patterns as string[]) ?? [],
          ...(metadata && { metadata }),
        })
        return
      }
      case 'permission.replied':
        this.h.onPermissionClosed?.(String(d.requestId))
        this.line(paint(d.reply === 'reject' ? 'red' : 'green', `  permission ${String(d.reply)}`))
        return
      case 'elicitation.requested':
        // the server's words, shown (control characters as escapes), never obeyed
        this.line(paint(['bold', 'yellow'], `? ${printable(String(d.server))} asks: ${printable(String(d.message))}`))
        this.h.onElicitation?.({
          elicitationId: String(d.elicitationId),
          server: String(d.server),
          message: String(d.message),
          requestedSchema: (d.requestedSchema as Record<string, unknown> | undefined) ?? {},
        })
        return
      case 'elicitation.answered':
        this.h.onElicitationClosed?.(String(d.elicitationId))
        this.line(
          paint(d.action === 'accept' ? 'green' : 'red', `  question ${ANSWERED[String(d.action)] ?? 'closed'}`),
        )
        return
      case 'step.retried':
        this.line(
          paint('yellow', `  … retrying (attempt ${String(d.attempt)} in ${String(d.delayMs)} ms): ${String(d.error)}`),
        )
        return
      case 'message.completed': {
        const err = d.error as { kind: string; message: string } | undefined
        if (err) this.line(paint('red', `  ! ${err.kind}: ${err.message}`))
        return
      }
      case 'run.finished': {
        const err = d.error as { kind: string; message: string } | undefined
        if (err) this.line(paint('red', `! ${err.kind}: ${err.message}`))
        else if (d.outcome !== 'idle') this.line(paint('yellow', `(run ${String(d.outcome)})`))
        this.h.onRunFinished?.(String(d.outcome), e.seq, err)
        return
      }
      default:
        return
    }
  }
}

/** One host a call's command reached or was refused through the sandbox's proxy (a tool.network event). */
export function networkLine(d: Record<string, unknown>): string {
  const where = printable(`${String(d.host)}:${String(d.port)}`)
  const times = Number(d.connections) === 1 ? '' : ` ×${String(d.connections)}`
  return d.allowed
    ? `↔ ${where}${times} — ${bytes(Number(d.bytesIn))} in, ${bytes(Number(d.bytesOut))} out`
    : `⊘ ${where}${times} — refused${d.reason ? ` (${printable(String(d.reason))})` : ''}`
}

function bytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 2 ** 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 2 ** 20).toFixed(1)} MiB`
}
