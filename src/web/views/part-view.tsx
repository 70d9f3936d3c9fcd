import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import type { Part } from '../../client/index.js'
import { sessionHash } from '../route.js'
import { Badge, pure } from '../ui.js'

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

const REPLIES = { once: 'approved once', always: 'approved always', reject: 'rejected' } as const

function PartViewImpl({ part, actions }: { part: Part; actions: PartActions }) {
  switch (part.type) {
    case 'text':
      return (
        <div class={part.ended ? 'part text' : 'part text streaming'}>
          {part.text}
          {!part.ended && <span class="caret" aria-hidden="true" />}
        </div>
      )
    case 'reasoning':
      return (
        <details class="part reasoning" open={!part.ended}>
          <summary>{part.ended ? 'Reasoning' : 'Reasoning…'}</summary>
          <div class="text">{part.text}</div>
        </details>
      )
    case 'tool':
      return <ToolView part={part} />
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
          finished: {part.finishReason} · {part.usage.inputTokens ?? 0} in / {part.usage.outputTokens ?? 0} out tokens
          {part.cost !== undefined && ` · $${part.cost.toFixed(4)}`}
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
          File: <code>{part.path ?? part.url ?? part.filename ?? '(attachment)'}</code>
          {part.mediaType && ` (${part.mediaType})`}
        </div>
      )
  }
}

function ToolView({ part }: { part: Extract<Part, { type: 'tool' }> }) {
  const input = part.input as Record<string, unknown> | undefined
  const command = typeof input?.command === 'string' ? input.command : undefined
  const progress = part.state === 'running' ? part.metadata?.output : undefined
  const stateLabel = part.state === 'error' && part.error ? `error: ${part.error.kind}` : part.state
  return (
    <div class={`part tool tool-${part.state}`}>
      <div class="tool-head">
        <strong>{part.tool}</strong>
        {part.title && <span class="tool-title">{part.title}</span>}
        <Badge kind={part.state}>{stateLabel}</Badge>
        {part.permission && (
          <span class="who">
            {REPLIES[part.permission.reply]}
            {part.permission.by && ` by ${part.permission.by.name}`}
          </span>
        )}
      </div>
      {command !== undefined && <pre class="command">$ {command}</pre>}
      <Lazy class="tool-input" summary="Input">
        {() => <pre>{input !== undefined ? JSON.stringify(input, null, 2) : part.rawInput}</pre>}
      </Lazy>
      {part.network && part.network.length > 0 && (
        <ul class="tool-network" aria-label="Network">
          {part.network.map((use) => (
            <li key={`${use.host} ${use.port} ${use.allowed}`} class={use.allowed ? 'allowed' : 'refused'}>
              {networkLine(use)}
            </li>
          ))}
        </ul>
      )}
      {typeof progress === 'string' && progress !== '' && <pre class="output">{progress}</pre>}
      {part.output !== undefined && <pre class="output">{part.output}</pre>}
      {part.error && (
        <p class="tool-error">
          {part.error.kind}: {part.error.message}
        </p>
      )}
    </div>
  )
}

/** One host the call's command reached or was refused through the sandbox's proxy (docs/SECURITY.md). */
function networkLine(use: NonNullable<Extract<Part, { type: 'tool' }>['network']>[number]): string {
  const times = use.connections === 1 ? '' : ` ×${use.connections}`
  const size = (n: number) =>
    n < 1024 ? `${n} B` : n < 2 ** 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 2 ** 20).toFixed(1)} MiB`
  return use.allowed
    ? `${use.host}:${use.port}${times} — ${size(use.bytesIn)} in, ${size(use.bytesOut)} out`
    : `${use.host}:${use.port}${times} — refused${use.reason ? ` (${use.reason})` : ''}`
}

/** A disclosure whose content is made only once it is opened: a closed one costs its summary. */
function Lazy({ summary, class: className, children }: { summary: string; class: string; children: () => VNode }) {
  const [open, setOpen] = useState(false)
  return (
    <details class={className} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>{summary}</summary>
      {open && children()}
    </details>
  )
}

export const PartView = pure(PartViewImpl)
