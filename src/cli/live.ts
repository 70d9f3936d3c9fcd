import { describeInput } from './render.js'

/**
 * Renders one session's live events as they stream: text as it arrives,
 * tool calls with their states, retries and errors. Permission requests and
 * run ends are handed to the caller (chat prompts; demo answers).
 */

export interface LiveEvent {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
}

export interface LiveHandlers {
  readonly write: (text: string) => void
  readonly onPermission?: (request: { requestId: string; permission: string; patterns: string[] }) => void
  readonly onRunFinished?: (outcome: string, seq: number) => void
}

export class LiveRenderer {
  private readonly tools = new Map<string, string>()
  private midLine = false

  constructor(private readonly h: LiveHandlers) {}

  private line(text: string): void {
    this.h.write(`${this.midLine ? '\n' : ''}${text}\n`)
    this.midLine = false
  }

  handle(e: LiveEvent): void {
    const d = e.data
    switch (e.type) {
      case 'message.created':
        if (d.role === 'assistant') this.line(`< assistant${d.model ? ` (${String(d.model)})` : ''}`)
        return
      case 'text.delta':
        this.h.write(String(d.text))
        this.midLine = !String(d.text).endsWith('\n')
        return
      case 'text.ended':
        if (this.midLine) this.h.write('\n')
        this.midLine = false
        return
      case 'reasoning.started':
        this.line('  (thinking…)')
        return
      case 'tool.input.started':
        this.tools.set(String(d.partId), String(d.tool))
        this.line(`  ⚙ ${String(d.tool)} — pending`)
        return
      case 'tool.called':
        this.tools.set(String(d.partId), String(d.tool))
        this.line(`  ⚙ ${String(d.tool)} ${describeInput(d.input)} — running`)
        return
      case 'tool.completed': {
        const first =
          String(d.output)
            .split('\n')
            .find((l) => l.trim() !== '') ?? ''
        this.line(`  ✓ ${this.tools.get(String(d.partId)) ?? 'tool'} — completed: ${first.slice(0, 100)}`)
        return
      }
      case 'tool.failed': {
        const err = d.error as { kind: string; message: string }
        this.line(`  ✗ ${this.tools.get(String(d.partId)) ?? 'tool'} — ${err.kind}: ${err.message.split('\n')[0]}`)
        return
      }
      case 'permission.requested':
        this.h.onPermission?.({
          requestId: String(d.requestId),
          permission: String(d.permission),
          patterns: (d.patterns as string[]) ?? [],
        })
        return
      case 'permission.replied':
        this.line(`  permission ${String(d.reply)}`)
        return
      case 'step.retried':
        this.line(`  … retrying (attempt ${String(d.attempt)} in ${String(d.delayMs)} ms): ${String(d.error)}`)
        return
      case 'message.completed': {
        const err = d.error as { kind: string; message: string } | undefined
        if (err) this.line(`  ! ${err.kind}: ${err.message}`)
        return
      }
      case 'run.finished': {
        const err = d.error as { kind: string; message: string } | undefined
        if (err) this.line(`! ${err.kind}: ${err.message}`)
        else if (d.outcome !== 'idle') this.line(`(run ${String(d.outcome)})`)
        this.h.onRunFinished?.(String(d.outcome), e.seq)
        return
      }
      default:
        return
    }
  }
}
