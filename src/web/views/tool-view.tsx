import type { VNode } from 'preact'
import { useState } from 'preact/hooks'
import type { Part } from '../../client/index.js'
import { exitBadge, isLong, lineCount, splitBashOutput, toolStatus } from '../tool-display.js'
import { Badge, formatBytes, plural } from '../ui.js'

/**
 * A tool call (docs/WEB.md "Reading"): its name and title, its state as it
 * is (waiting for approval, running, completed, failed, interrupted), who
 * answered its permission request, a command line, its input on request,
 * its live output while it runs, and its output — folded with its size when
 * long, and for bash without the metadata block, whose exit code is a badge.
 */

const REPLIES = { once: 'approved once', always: 'approved always', reject: 'rejected' } as const

type ToolPart = Extract<Part, { type: 'tool' }>

export function ToolView({ part, waiting }: { part: ToolPart; waiting: boolean }) {
  const input = part.input as Record<string, unknown> | undefined
  const command = typeof input?.command === 'string' ? input.command : undefined
  const progress = part.state === 'running' ? part.metadata?.output : undefined
  const status = toolStatus(part, waiting)
  const ended = part.state === 'completed' || part.state === 'error'
  const exit = ended ? exitBadge(part) : undefined
  const bash = part.tool === 'bash'
  const output = part.output !== undefined && bash ? splitBashOutput(part.output) : undefined
  const error = part.error && bash ? splitBashOutput(part.error.message) : undefined
  return (
    <div class={`part tool tool-${status.kind}`}>
      <div class="tool-head">
        <strong>{part.tool}</strong>
        {part.title && <span class="tool-title">{part.title}</span>}
        <Badge kind={status.kind}>{status.label}</Badge>
        {exit && <Badge kind={exit.kind}>{exit.label}</Badge>}
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
      {typeof progress === 'string' && progress !== '' && <Output text={progress} live />}
      {part.output !== undefined && <Output text={output?.output ?? part.output} />}
      {[...(output?.notes ?? []), ...(error?.notes ?? [])].map((note) => (
        <p key={note} class="tool-note">
          {note}
        </p>
      ))}
      {part.error && <ToolError kind={part.error.kind} text={error ? error.output : part.error.message} />}
    </div>
  )
}

/** One host the call's command reached or was refused through the sandbox's proxy (docs/SECURITY.md). */
function networkLine(use: NonNullable<ToolPart['network']>[number]): string {
  const times = use.connections === 1 ? '' : ` ×${use.connections}`
  return use.allowed
    ? `${use.host}:${use.port}${times} — ${formatBytes(use.bytesIn)} in, ${formatBytes(use.bytesOut)} out`
    : `${use.host}:${use.port}${times} — refused${use.reason ? ` (${use.reason})` : ''}`
}

/** An output: shown when short; folded behind its size when long, and drawn only once opened. */
function Output({ text, live = false }: { text: string; live?: boolean }) {
  if (text === '') return <p class="tool-note">No output.</p>
  // a running command's output is followed at its end, not folded
  if (live) return <pre class="output">{text.length > LIVE_TAIL ? `…${text.slice(-LIVE_TAIL)}` : text}</pre>
  if (!isLong(text)) return <pre class="output">{text}</pre>
  const size = `${plural(lineCount(text), 'line')}, ${formatBytes(new TextEncoder().encode(text).length)}`
  return (
    <Lazy class="output-fold" summary={`Output (${size})`}>
      {() => <pre class="output">{text}</pre>}
    </Lazy>
  )
}

/** characters of a running command's output shown: its latest */
const LIVE_TAIL = 4_000

/** Why a call failed: one short line inline, anything longer as an output. */
function ToolError({ kind, text }: { kind: string; text: string }) {
  const short = !text.includes('\n') && text.length <= 300
  return (
    <div class="tool-error">
      <p>
        {kind}
        {short ? `: ${text || 'the command ended early'}` : ':'}
      </p>
      {!short && <Output text={text} />}
    </div>
  )
}

/** A disclosure whose content is made only once it is opened: a closed one costs its summary. */
export function Lazy({
  summary,
  class: className,
  children,
}: {
  summary: string
  class: string
  children: () => VNode
}) {
  const [open, setOpen] = useState(false)
  return (
    <details class={className} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>{summary}</summary>
      {open && children()}
    </details>
  )
}
