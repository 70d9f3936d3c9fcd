import { createHash } from 'node:crypto'
import type { ChronicleEvent, InputPart } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { Session } from '../projections/model.js'
import { assertWritable } from './read-only.js'

/**
 * Submitting input (DESIGN §6, the durable inbox): pure checks and the
 * decider. The same inputId with the same content is the original
 * acceptance (nothing appended); with different content it is a conflict.
 */

export interface SubmitCommand {
  readonly inputId: string
  readonly parts: readonly InputPart[]
  readonly agent?: string
  readonly model?: string
  /** `steer` (default): reaches a running run at its next step; `queue`: waits for the run to end */
  readonly delivery?: 'steer' | 'queue'
  /** record without running */
  readonly noReply?: boolean
}

export interface PriorAcceptance {
  readonly digest: string
  readonly seq: number
}

export type SubmitDecision =
  | { readonly duplicate: false; readonly events: ChronicleEvent[] }
  | { readonly duplicate: true; readonly seq: number }

export const DEFAULT_MAX_INPUT_BYTES = 1024 * 1024

/** The content digest that makes a resubmission idempotent: every field but the id. */
export function inputDigest(command: SubmitCommand): string {
  const content = {
    parts: command.parts,
    agent: command.agent ?? null,
    model: command.model ?? null,
    delivery: command.delivery ?? 'steer',
    noReply: command.noReply ?? false,
  }
  return createHash('sha256').update(JSON.stringify(content)).digest('base64url')
}

/** EMPTY_INPUT and PAYLOAD_TOO_LARGE, checked before anything else. */
export function checkInput(command: SubmitCommand, maxBytes: number = DEFAULT_MAX_INPUT_BYTES): void {
  const meaningful = command.parts.some((p) => (p.type === 'text' ? p.text.trim().length > 0 : Boolean(p.path ?? p.url)))
  if (!meaningful) throw new ChronicleError('EMPTY_INPUT', 'the input has no text and no file')
  const bytes = Buffer.byteLength(JSON.stringify(command.parts))
  if (bytes > maxBytes) {
    throw new ChronicleError('PAYLOAD_TOO_LARGE', `the input is ${bytes} bytes; the limit is ${maxBytes}`, { bytes, limit: maxBytes })
  }
}

export function decideSubmit(command: SubmitCommand, session: Session | undefined, prior: PriorAcceptance | undefined): SubmitDecision {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', 'no such session')
  assertWritable(session)
  const digest = inputDigest(command)
  if (prior) {
    if (prior.digest !== digest) {
      throw new ChronicleError('INPUT_CONFLICT', `input ${command.inputId} was already accepted with different content`, {
        inputId: command.inputId,
        seq: prior.seq,
      })
    }
    return { duplicate: true, seq: prior.seq }
  }
  if (session.archived) throw new ChronicleError('SESSION_ARCHIVED', `session ${session.id} is archived`)
  return {
    duplicate: false,
    events: [
      {
        type: 'input.accepted',
        data: {
          inputId: command.inputId,
          parts: [...command.parts],
          ...(command.agent && { agent: command.agent }),
          ...(command.model && { model: command.model }),
          delivery: command.delivery ?? 'steer',
          noReply: command.noReply ?? false,
          digest,
        },
      },
    ],
  }
}
