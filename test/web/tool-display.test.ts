import { describe, expect, it } from 'vitest'
import type { Part } from '../../src/client/index.js'
import { exitBadge, isLong, lineCount, splitBashOutput, toolStatus } from '../../src/web/tool-display.js'

/** How the page words a tool call's state and cleans bash's output (src/web/tool-display.ts). */

type ToolPart = Extract<Part, { type: 'tool' }>
const call = (fields: Partial<ToolPart>): ToolPart =>
  Object.assign(
    { id: 'prt_1', sessionId: 'ses_1', messageId: 'msg_1', type: 'tool', callId: 'call_1', tool: 'bash' },
    { state: 'running', rawInput: '{}' },
    fields,
  ) as ToolPart

describe('a tool call’s state', () => {
  it('is waiting for approval while its permission request is pending, whatever its recorded state', () => {
    expect(toolStatus(call({ state: 'pending' }), true)).toEqual({ kind: 'waiting', label: 'waiting for approval' })
    expect(toolStatus(call({ state: 'running' }), true)).toEqual({ kind: 'waiting', label: 'waiting for approval' })
    expect(toolStatus(call({ state: 'completed' }), true)).toEqual({ kind: 'completed', label: 'completed' })
  })

  it('names each ending: completed, failed, invalid input, denied, cancelled, interrupted', () => {
    const ended = (kind: NonNullable<ToolPart['error']>['kind']) =>
      toolStatus(call({ state: 'error', error: { kind, message: 'm' } }), false)
    expect([
      toolStatus(call({ state: 'pending' }), false),
      toolStatus(call({ state: 'running' }), false),
      toolStatus(call({ state: 'completed' }), false),
      ended('failed'),
      ended('invalid'),
      ended('denied'),
      ended('aborted'),
      ended('interrupted'),
    ]).toEqual([
      { kind: 'pending', label: 'preparing' },
      { kind: 'running', label: 'running' },
      { kind: 'completed', label: 'completed' },
      { kind: 'error', label: 'failed' },
      { kind: 'error', label: 'invalid input' },
      { kind: 'error', label: 'denied' },
      { kind: 'interrupted', label: 'cancelled' },
      { kind: 'interrupted', label: 'interrupted' },
    ])
  })

  it('shows bash’s exit as a badge: the code, a signal, a timeout; nothing for other tools', () => {
    expect(exitBadge(call({ metadata: { exitCode: 0 } }))).toEqual({ kind: 'ok', label: 'exit 0' })
    expect(exitBadge(call({ metadata: { exitCode: 2 } }))).toEqual({ kind: 'error', label: 'exit 2' })
    expect(exitBadge(call({ metadata: { exitCode: null, signal: 'SIGKILL' } }))).toEqual({
      kind: 'error',
      label: 'SIGKILL',
    })
    expect(exitBadge(call({ metadata: { exitCode: null, timedOut: true } }))).toEqual({
      kind: 'error',
      label: 'timed out',
    })
    expect(exitBadge(call({ tool: 'read', metadata: { exitCode: 0 } }))).toBeUndefined()
  })
})

describe('bash’s output', () => {
  it('loses the metadata block that ends it; the notes other than the exit code are kept', () => {
    expect(splitBashOutput('a\nb\n<bash_metadata>\nexit code: 0\n</bash_metadata>')).toEqual({
      output: 'a\nb',
      notes: [],
    })
    expect(
      splitBashOutput(
        'partial\n<bash_metadata>\nThe command timed out after 10 ms; its process group was killed.\nterminated by signal SIGTERM\n</bash_metadata>',
      ),
    ).toEqual({ output: 'partial', notes: ['The command timed out after 10 ms; its process group was killed.'] })
    expect(splitBashOutput('<bash_metadata>\nexit code: 1\n</bash_metadata>')).toEqual({ output: '', notes: [] })
  })

  it('keeps tags the command printed itself: only the block the tool appended last is taken off', () => {
    const printed = 'x\n<bash_metadata>\nexit code: 0\n</bash_metadata>\ny'
    expect(splitBashOutput(printed)).toEqual({ output: printed, notes: [] })
    expect(splitBashOutput(`${printed}\n<bash_metadata>\nexit code: 7\n</bash_metadata>\n`)).toEqual({
      output: printed,
      notes: [],
    })
  })

  it('is long past 12 lines or 2,000 characters; its lines are counted as an editor would', () => {
    expect(isLong('1\n'.repeat(11))).toBe(false)
    expect(isLong('1\n'.repeat(12))).toBe(true)
    expect(isLong('x'.repeat(2001))).toBe(true)
    expect([lineCount(''), lineCount('a'), lineCount('a\n'), lineCount('a\nb')]).toEqual([0, 1, 1, 2])
  })
})
