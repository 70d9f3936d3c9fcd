import type { Part } from '../../client/index.js'
import { Markdown } from '../markdown.js'
import { sessionHash } from '../route.js'
import { Badge, formatBytes, formatCount, pure } from '../ui.js'
import { ToolView } from './tool-view.js'

/**
 * One part of a message (docs/EVENTS.md): streamed text and reasoning, a
 * tool call with its state and output and who answered its permission
 * request, the steps, a message's file changes, a sub-agent.
 */

export interface PartActions {
  /** "what the model saw" for the step this step-start part began */
  readonly onContext?: (partId: string) => void
  /** the diff of what a message's tools changed */
  readonly onDiff?: (messageId: string) => void
}

interface PartProps {
  readonly part: Part
  readonly actions: PartActions
  /** a tool call whose permission request is pending */
  readonly waiting?: boolean
}

function PartViewImpl({ part, actions, waiting = false }: PartProps) {
  switch (part.type) {
    case 'text':
      return (
        <div class={part.ended ? 'part text markdown' : 'part text markdown streaming'}>
          <Markdown text={part.text} />
          {!part.ended && <span class="caret" aria-hidden="true" />}
        </div>
      )
    case 'reasoning':
      return (
        <details class="part reasoning" open={!part.ended}>
          <summary>{part.ended ? 'Reasoning' : 'Reasoning…'}</summary>
          <div class="text markdown">
            <Markdown text={part.text} />
          </div>
        </details>
      )
    case 'tool':
      return <ToolView part={part} waiting={waiting} />
    case 'step-start':
      return (
        <div class="part step">
          <span>Step {part.step}</span>
          {actions.onContext && (
            <button type="button" class="link" onClick={() => actions.onContext?.(part.id)}>
              What the model saw
            </button>
          )}
        </div>
      )
    case 'step-finish':
      return (
        <div class="part step-finish">
          finished: {part.finishReason} · {usageText(part.usage)}
          {part.cost !== undefined && ` · ${formatCost(part.cost)}`}
        </div>
      )
    case 'patch':
      return (
        <div class="part patch">
          <span>Files changed:</span>
          <ul class="files">
            {part.files.map((f) => (
              <li key={f.path}>
                <code>{f.path}</code> <Badge kind={f.status}>{f.status}</Badge>
                {f.binary ? ' binary' : ` +${f.added ?? 0} −${f.removed ?? 0}`}
              </li>
            ))}
          </ul>
          {actions.onDiff && (
            <button type="button" onClick={() => actions.onDiff?.(part.messageId)}>
              Show diff
            </button>
          )}
        </div>
      )
    case 'subtask':
      return (
        <div class="part subtask">
          Sub-agent: <a href={sessionHash(part.childSessionId)}>{part.childSessionId}</a>
          {part.outcome ? <Badge kind={part.outcome}>{part.outcome}</Badge> : <Badge kind="busy">running</Badge>}
        </div>
      )
    case 'file':
      return (
        <div class="part file">
          File: <code>{part.filename ?? part.path ?? part.url ?? '(attachment)'}</code>
          {part.mediaType && ` (${part.mediaType}${part.size !== undefined ? `, ${formatBytes(part.size)}` : ''})`}
        </div>
      )
  }
}

/** A step's or a session's tokens: in (of which cached), out (of which reasoning). */
export function usageText(usage: {
  readonly inputTokens?: number | undefined
  readonly outputTokens?: number | undefined
  readonly reasoningTokens?: number | undefined
  readonly cachedInputTokens?: number | undefined
}): string {
  const n = (v: number | undefined) => formatCount(v ?? 0)
  const cached = usage.cachedInputTokens ? ` (${n(usage.cachedInputTokens)} cached)` : ''
  const reasoning = usage.reasoningTokens ? ` (${n(usage.reasoningTokens)} reasoning)` : ''
  return `${n(usage.inputTokens)} in${cached} / ${n(usage.outputTokens)} out${reasoning} tokens`
}

export function formatCost(usd: number): string {
  return `$${usd < 0.01 && usd > 0 ? usd.toFixed(4) : usd.toFixed(2)}`
}

export const PartView = pure(PartViewImpl)
