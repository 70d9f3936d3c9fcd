import type { Part } from '../client/index.js'

/**
 * How a tool call reads on the page (docs/WEB.md "Reading"): its state in
 * words, and bash's output without the block the tool appends for the model
 * (src/tools/builtin/bash.ts: `<bash_metadata>` with the exit code and
 * whether it timed out or was cancelled) — the page shows those as badges
 * and a note instead.
 */

type ToolPart = Extract<Part, { type: 'tool' }>

export interface ToolStatus {
  /** the badge's class: the colour */
  readonly kind: string
  /** the badge's words: the meaning */
  readonly label: string
}

const ERRORS = {
  failed: 'failed',
  invalid: 'invalid input',
  denied: 'denied',
  aborted: 'cancelled',
  interrupted: 'interrupted',
} as const

/** The call's state as it is: `waiting` when a permission request for it is pending. */
export function toolStatus(part: ToolPart, waiting: boolean): ToolStatus {
  if (waiting && (part.state === 'pending' || part.state === 'running'))
    return { kind: 'waiting', label: 'waiting for approval' }
  switch (part.state) {
    case 'pending':
      return { kind: 'pending', label: 'preparing' }
    case 'running':
      return { kind: 'running', label: 'running' }
    case 'completed':
      return { kind: 'completed', label: 'completed' }
    case 'error': {
      const kind = part.error?.kind ?? 'failed'
      return { kind: kind === 'interrupted' || kind === 'aborted' ? 'interrupted' : 'error', label: ERRORS[kind] }
    }
  }
}

export interface BashOutput {
  /** what the command printed */
  readonly output: string
  /** the tool's notes for the model (timed out, cancelled), without the exit code the badge shows */
  readonly notes: readonly string[]
}

const OPEN = '<bash_metadata>'
const CLOSE = '</bash_metadata>'

/**
 * Splits bash's trailing metadata block off its output. Only the block that
 * ends the output is the tool's (it is appended last); a command that prints
 * the tags itself earlier keeps them as the text it printed.
 */
export function splitBashOutput(text: string): BashOutput {
  const trimmed = text.trimEnd()
  const start = trimmed.lastIndexOf(OPEN)
  if (start < 0 || !trimmed.endsWith(CLOSE)) return { output: text, notes: [] }
  const inner = trimmed.slice(start + OPEN.length, trimmed.length - CLOSE.length)
  const notes = inner
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !/^exit code: -?\d+$/.test(line) && !/^terminated by signal \w+$/.test(line))
  const output = trimmed.slice(0, start)
  return { output: output.endsWith('\n') ? output.slice(0, -1) : output, notes }
}

/** bash's exit as a badge: its code (0 is ok), or the signal that ended it; undefined for other tools. */
export function exitBadge(part: ToolPart): ToolStatus | undefined {
  if (part.tool !== 'bash' || !part.metadata) return undefined
  const { exitCode, signal, timedOut } = part.metadata as { exitCode?: unknown; signal?: unknown; timedOut?: unknown }
  if (timedOut === true) return { kind: 'error', label: 'timed out' }
  if (typeof exitCode === 'number') return { kind: exitCode === 0 ? 'ok' : 'error', label: `exit ${exitCode}` }
  if (typeof signal === 'string') return { kind: 'error', label: signal }
  return undefined
}

/** lines and characters past which an output is folded, its size in the summary */
export const FOLD_LINES = 12
export const FOLD_CHARS = 2_000

export function isLong(text: string): boolean {
  if (text.length > FOLD_CHARS) return true
  let lines = 0
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) if (++lines >= FOLD_LINES) return true
  return false
}

export function lineCount(text: string): number {
  let lines = text === '' ? 0 : 1
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) lines++
  return text.endsWith('\n') ? lines - 1 : lines
}
