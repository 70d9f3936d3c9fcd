import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  checkInput,
  DEFAULT_MAX_INPUT_BYTES,
  decideSubmit,
  inputDigest,
  type SubmitCommand,
  type SubmitDecision,
} from '../../src/commands/input.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { expectFailure, given } from './given.js'
import { accepted, archived, created, imported, runStarted } from './history.js'

/**
 * Submitting input: `checkInput` refuses empty and oversized input before
 * anything is read; `decideSubmit` accepts it once. The same inputId with the
 * same content is the original acceptance (nothing appended); with other
 * content it is a conflict.
 */

const fixTheBug: SubmitCommand = { inputId: 'in_1', parts: [{ type: 'text', text: 'fix the bug' }] }

describe('checkInput', () => {
  it('accepts text, and a file part naming a path or a url', () => {
    expect(() => checkInput(fixTheBug)).not.toThrow()
    expect(() => checkInput({ inputId: 'in_1', parts: [{ type: 'file', path: '/repo/a.png' }] })).not.toThrow()
    expect(() =>
      checkInput({ inputId: 'in_1', parts: [{ type: 'file', url: 'https://example.com/a.png' }] }),
    ).not.toThrow()
  })

  it('accepts blank text next to a meaningful part', () => {
    expect(() =>
      checkInput({
        inputId: 'in_1',
        parts: [
          { type: 'text', text: '  ' },
          { type: 'text', text: 'go' },
        ],
      }),
    ).not.toThrow()
  })

  it('refuses input with no parts: EMPTY_INPUT', () => {
    expectFailure(() => checkInput({ inputId: 'in_1', parts: [] }), 'EMPTY_INPUT', 'the input has no text and no file')
  })

  it('refuses whitespace-only text: EMPTY_INPUT', () => {
    expectFailure(() => checkInput({ inputId: 'in_1', parts: [{ type: 'text', text: ' \n\t ' }] }), 'EMPTY_INPUT')
  })

  it('refuses a file part with neither path nor url: EMPTY_INPUT', () => {
    expectFailure(
      () => checkInput({ inputId: 'in_1', parts: [{ type: 'file', mediaType: 'image/png', filename: 'a.png' }] }),
      'EMPTY_INPUT',
    )
  })

  it('measures the parts as UTF-8 JSON bytes: exactly the limit passes, one byte more is PAYLOAD_TOO_LARGE', () => {
    // [{"type":"text","text":"hello"}] is 32 bytes
    const hello: SubmitCommand = { inputId: 'in_1', parts: [{ type: 'text', text: 'hello' }] }
    expect(() => checkInput(hello, 32)).not.toThrow()
    const error = expectFailure(
      () => checkInput(hello, 31),
      'PAYLOAD_TOO_LARGE',
      'the input is 32 bytes; the limit is 31',
    )
    expect(error.details).toEqual({ bytes: 32, limit: 31 })
  })

  it('counts bytes, not characters', () => {
    // [{"type":"text","text":"é"}] is 28 characters, 29 bytes
    expectFailure(
      () => checkInput({ inputId: 'in_1', parts: [{ type: 'text', text: 'é' }] }, 28),
      'PAYLOAD_TOO_LARGE',
      'the input is 29 bytes',
    )
  })

  it('has a 1 MiB limit by default', () => {
    expect(DEFAULT_MAX_INPUT_BYTES).toBe(1024 * 1024)
    const big: SubmitCommand = { inputId: 'in_1', parts: [{ type: 'text', text: 'x'.repeat(DEFAULT_MAX_INPUT_BYTES) }] }
    expectFailure(() => checkInput(big), 'PAYLOAD_TOO_LARGE', `the limit is ${DEFAULT_MAX_INPUT_BYTES}`)
  })

  it('checks emptiness before size', () => {
    expectFailure(
      () => checkInput({ inputId: 'in_1', parts: [{ type: 'text', text: ' '.repeat(100) }] }, 10),
      'EMPTY_INPUT',
    )
  })
})

describe('inputDigest', () => {
  it('is the sha256 (base64url) of the content with defaults filled in, stable across releases', () => {
    const content = { parts: fixTheBug.parts, agent: null, model: null, delivery: 'steer', noReply: false }
    const expected = createHash('sha256').update(JSON.stringify(content)).digest('base64url')
    expect(inputDigest(fixTheBug)).toBe(expected)
    expect(inputDigest(fixTheBug)).toBe('wj0uUaHKzeE4TrPkkuwUtJmhbul-0NblOhI1gR49mMI')
  })

  it('ignores the inputId and treats an omitted option as its default', () => {
    expect(inputDigest({ ...fixTheBug, inputId: 'in_2' })).toBe(inputDigest(fixTheBug))
    expect(inputDigest({ ...fixTheBug, delivery: 'steer', noReply: false })).toBe(inputDigest(fixTheBug))
  })

  it('changes with every field of the content', () => {
    const variants: SubmitCommand[] = [
      { ...fixTheBug, parts: [{ type: 'text', text: 'fix the other bug' }] },
      { ...fixTheBug, agent: 'plan' },
      { ...fixTheBug, model: 'openai:gpt-5-mini' },
      { ...fixTheBug, delivery: 'queue' },
      { ...fixTheBug, noReply: true },
    ]
    const digests = new Set([fixTheBug, ...variants].map(inputDigest))
    expect(digests.size).toBe(variants.length + 1)
  })
})

describe('decideSubmit', () => {
  it('accepts input with the defaults written out: steer, reply, and its digest', () => {
    given(created)
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .then({
        duplicate: false,
        events: [
          {
            type: 'input.accepted',
            data: {
              inputId: 'in_1',
              parts: [{ type: 'text', text: 'fix the bug' }],
              delivery: 'steer',
              noReply: false,
              digest: 'wj0uUaHKzeE4TrPkkuwUtJmhbul-0NblOhI1gR49mMI',
            },
          },
        ],
      })
  })

  it('carries agent, model, delivery and noReply', () => {
    const command: SubmitCommand = {
      inputId: 'in_2',
      parts: [
        { type: 'text', text: 'plan it' },
        { type: 'file', path: '/repo/spec.md', mediaType: 'text/markdown' },
      ],
      agent: 'plan',
      model: 'openai:gpt-5-mini',
      delivery: 'queue',
      noReply: true,
    }
    given(created)
      .when((s) => decideSubmit(command, s, undefined))
      .then({
        duplicate: false,
        events: [
          {
            type: 'input.accepted',
            data: {
              inputId: 'in_2',
              parts: [
                { type: 'text', text: 'plan it' },
                { type: 'file', path: '/repo/spec.md', mediaType: 'text/markdown' },
              ],
              agent: 'plan',
              model: 'openai:gpt-5-mini',
              delivery: 'queue',
              noReply: true,
              digest: inputDigest(command),
            },
          },
        ],
      })
  })

  const queuedFix: SubmitCommand = { ...fixTheBug, delivery: 'queue' }
  /** what accepting `queuedFix` decides: its acceptance, with the defaults written out */
  const queuedFixAccepted: SubmitDecision = {
    duplicate: false,
    events: [
      {
        type: 'input.accepted',
        data: {
          inputId: 'in_1',
          parts: [{ type: 'text', text: 'fix the bug' }],
          delivery: 'queue',
          noReply: false,
          digest: inputDigest(queuedFix),
        },
      },
    ],
  }

  it('accepts input while a run is going (delivering it is the runtime’s business)', () => {
    given(created, accepted('in_0'), runStarted('run_1'))
      .when((s) => decideSubmit(queuedFix, s, undefined))
      .then(queuedFixAccepted)
  })

  const restoreStarted = (kind: 'revert' | 'handover'): ChronicleEvent => ({
    type: 'workspace.restore.started',
    data: { restoreId: 'rst_1', kind, from: 'a'.repeat(40), tree: 'b'.repeat(40), messages: [] },
  })

  it('refuses input while a revert restores the files: SESSION_BUSY', () => {
    given(created, restoreStarted('revert'))
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .thenFails('SESSION_BUSY', 'session ses_1 is being reverted; try again when it ends')
  })

  it('accepts input while a cluster node hands the files over: it waits for the resumed run', () => {
    given(created, accepted('in_0'), runStarted('run_1'), restoreStarted('handover'))
      .when((s) => decideSubmit(queuedFix, s, undefined))
      .then(queuedFixAccepted)
  })

  it('the same inputId with the same content is the original acceptance: nothing appended', () => {
    given(created, accepted('in_1'))
      .when((s) => decideSubmit(fixTheBug, s, { digest: inputDigest(fixTheBug), seq: 2 }))
      .then({ duplicate: true, seq: 2 })
  })

  it('the same inputId with other content is INPUT_CONFLICT', () => {
    const error = given(created, accepted('in_1'))
      .when((s) => decideSubmit({ ...fixTheBug, delivery: 'queue' }, s, { digest: inputDigest(fixTheBug), seq: 2 }))
      .thenFails('INPUT_CONFLICT', 'input in_1 was already accepted with different content')
    expect(error.details).toEqual({ inputId: 'in_1', seq: 2 })
  })

  it('a resubmission after the session was archived is still the original acceptance', () => {
    given(created, accepted('in_1'), archived)
      .when((s) => decideSubmit(fixTheBug, s, { digest: inputDigest(fixTheBug), seq: 2 }))
      .then({ duplicate: true, seq: 2 })
  })

  it('refuses an unknown session: SESSION_NOT_FOUND', () => {
    given()
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .thenFails('SESSION_NOT_FOUND')
  })

  it('refuses an archived session: SESSION_ARCHIVED', () => {
    given(created, archived)
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .thenFails('SESSION_ARCHIVED', 'session ses_1 is archived')
  })

  it('refuses an imported session, even a resubmission: SESSION_READ_ONLY', () => {
    given(created, imported)
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .thenFails('SESSION_READ_ONLY')
    given(created, accepted('in_1'), imported)
      .when((s) => decideSubmit(fixTheBug, s, { digest: inputDigest(fixTheBug), seq: 2 }))
      .thenFails('SESSION_READ_ONLY')
  })

  it('read-only comes before archived', () => {
    given(created, imported, archived)
      .when((s) => decideSubmit(fixTheBug, s, undefined))
      .thenFails('SESSION_READ_ONLY')
  })
})
