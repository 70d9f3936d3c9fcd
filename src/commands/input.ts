import { createHash } from 'node:crypto'
import type { EventMeta } from '../events/envelope.js'
import type { ChronicleEvent, InputPart } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { Session } from '../projections/fold/model.js'
import { type CommandPorts, execute } from './execute.js'
import { assertWritable } from './read-only.js'

/**
 * Submitting input (docs/API.md, the durable inbox): pure checks, the
 * decider, and the command. The same inputId with the same content is the
 * original acceptance (nothing appended); with different content it is a
 * conflict. The input is durable (FULL) before the command returns; waking
 * the session's run is the caller's next step.
 */

/** What a client (or the runtime, for a sub-agent) submits. */
export interface SubmitInput {
  /** client-chosen id that makes the submission idempotent; generated when absent */
  readonly inputId?: string
  readonly parts: readonly InputPart[]
  readonly agent?: string
  readonly model?: string
  /** `steer` (default): reaches a running run at its next step; `queue`: waits for the run to end */
  readonly delivery?: 'steer' | 'queue'
  /** record without running */
  readonly noReply?: boolean
}

/**
 * A submission with its id settled; a noReply one with the ids of the user
 * message it becomes at once.
 */
export type SubmitCommand = SubmitInput & {
  readonly inputId: string
  readonly message?: { readonly messageId: string; readonly partIds: readonly string[] }
  /** the parts as logged: files given by path read into blobs (the digest stays over the parts as sent) */
  readonly attached?: readonly InputPart[]
}

export interface SubmitResult {
  readonly inputId: string
  readonly seq: number
  readonly duplicate: boolean
}

/** Where an inputId was first accepted, and the digest of what it carried. */
export interface PriorAcceptance {
  readonly digest: string
  readonly seq: number
}

/** What submitting needs to know beyond the session: where inputs were accepted before, and what is valid. */
export interface SubmitContext {
  readonly ids: IdSource
  /**
   * the earlier acceptance of an inputId in the session (an index over the log); `fresh`: read from the log,
   * as the index may lag a write that just conflicted with this command (another node's)
   */
  prior(sessionId: string, inputId: string, fresh?: boolean): Promise<PriorAcceptance | undefined>
  /** UNKNOWN_AGENT unless the agent exists */
  readonly agents: ReadonlySet<string>
  /** throws UNKNOWN_MODEL (or NO_MODEL_CONFIGURED) for a model that cannot be resolved */
  validateModel(model: string): void
  readonly maxInputBytes?: number
  /**
   * Reads the files the parts give by path (inside the session directory) into blobs and returns the parts
   * to log; throws the file's error (FILE_NOT_FOUND, FILE_FORBIDDEN, NOT_A_FILE, PAYLOAD_TOO_LARGE,
   * UNSUPPORTED_MEDIA_TYPE). Without it, a path is logged as given.
   */
  attach?(sessionId: string, parts: readonly InputPart[]): Promise<InputPart[]>
}

/** Makes an input durable in the session's inbox; nothing is appended for a duplicate. */
export async function submitInput(
  ports: CommandPorts,
  sessionId: string,
  input: SubmitInput,
  context: SubmitContext,
  by: 'user' | 'runtime' = 'user',
  who: Partial<Pick<EventMeta, 'by' | 'connection' | 'commandId'>> = {},
): Promise<SubmitResult> {
  let command: SubmitCommand = {
    ...input,
    inputId: input.inputId ?? context.ids.next('in'),
    ...(input.noReply && {
      message: { messageId: context.ids.next('msg'), partIds: input.parts.map(() => context.ids.next('prt')) },
    }),
  }
  checkInput(command, context.maxInputBytes ?? DEFAULT_MAX_INPUT_BYTES)
  if (command.agent !== undefined && !context.agents.has(command.agent)) {
    throw new ChronicleError(
      'UNKNOWN_AGENT',
      `unknown agent "${command.agent}"; known: ${[...context.agents].join(', ')}`,
    )
  }
  if (command.model !== undefined) context.validateModel(command.model)
  // a resubmission is answered from the log, without reading its files again (they may have changed since)
  const known = input.inputId !== undefined && (await context.prior(sessionId, command.inputId)) !== undefined
  if (!known && context.attach && command.parts.some((p) => p.type === 'file' && p.path !== undefined))
    command = { ...command, attached: await context.attach(sessionId, command.parts) }
  let duplicate: { seq: number } | undefined
  let decisions = 0
  const { events } = await execute(
    ports,
    sessionId,
    async (session) => {
      const fresh = decisions++ > 0 // decided again after a conflicting write: perhaps this very input, elsewhere
      const prior =
        input.inputId === undefined || !session ? undefined : await context.prior(sessionId, command.inputId, fresh)
      const decision = decideSubmit(command, session, prior)
      if (!decision.duplicate) return decision.events
      duplicate = { seq: decision.seq }
      return []
    },
    // an input refers to nothing queued in another session: under load it need not commit theirs
    // taken by whichever node the client reached: the node running the session delivers it when it hears it
    { durability: 'full', alone: true, anyNode: true, meta: { actor: by, ...who, input: command.inputId } },
  )
  if (duplicate) return { inputId: command.inputId, seq: duplicate.seq, duplicate: true }
  const accepted = events.find((e) => e.type === 'input.accepted')
  if (!accepted) throw new ChronicleError('INTERNAL', 'input.accepted was not appended')
  return { inputId: command.inputId, seq: accepted.seq, duplicate: false }
}

export type SubmitDecision =
  | { readonly duplicate: false; readonly events: ChronicleEvent[] }
  | { readonly duplicate: true; readonly seq: number }

export const DEFAULT_MAX_INPUT_BYTES = 1024 * 1024

/** The content digest that makes a resubmission idempotent: every field but the id. */
export function inputDigest(command: SubmitInput): string {
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
  for (const p of command.parts)
    if (p.type === 'file' && (p.blob !== undefined || p.size !== undefined || p.encoding !== undefined))
      throw new ChronicleError('BAD_REQUEST', "a file part's blob, size and encoding are set by the server")
  const meaningful = command.parts.some((p) =>
    p.type === 'text' ? p.text.trim().length > 0 : Boolean(p.path ?? p.url),
  )
  if (!meaningful) throw new ChronicleError('EMPTY_INPUT', 'the input has no text and no file')
  const bytes = Buffer.byteLength(JSON.stringify(command.parts))
  if (bytes > maxBytes) {
    throw new ChronicleError('PAYLOAD_TOO_LARGE', `the input is ${bytes} bytes; the limit is ${maxBytes}`, {
      bytes,
      limit: maxBytes,
    })
  }
}

/**
 * SESSION_BUSY while a revert or unrevert restores the session's files, or a fork's are written: an input would
 * land in the middle of them. A handover (a cluster node writing a claimed session's recorded tree before its
 * run resumes, docs/CLUSTER.md) refuses nothing: the input waits in the inbox for the resumed run.
 */
export function assertNotRestoring(session: Session): void {
  if (session.restoring && session.restoring.kind !== 'handover')
    throw new ChronicleError('SESSION_BUSY', `session ${session.id} is being reverted; try again when it ends`)
  if (session.materializing)
    throw new ChronicleError('SESSION_BUSY', `session ${session.id}'s directory is still being written`)
}

export function decideSubmit(
  command: SubmitCommand,
  session: Session | undefined,
  prior: PriorAcceptance | undefined,
): SubmitDecision {
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', 'no such session')
  assertWritable(session)
  const digest = inputDigest(command)
  if (prior) {
    if (prior.digest !== digest) {
      throw new ChronicleError(
        'INPUT_CONFLICT',
        `input ${command.inputId} was already accepted with different content`,
        {
          inputId: command.inputId,
          seq: prior.seq,
        },
      )
    }
    return { duplicate: true, seq: prior.seq }
  }
  if (session.archived) throw new ChronicleError('SESSION_ARCHIVED', `session ${session.id} is archived`)
  assertNotRestoring(session)
  return {
    duplicate: false,
    events: [
      // a new input after a revert makes it final: the model will never see the reverted messages again
      ...(session.revert
        ? [{ type: 'session.revert.finalized' as const, data: { restoreId: session.revert.restoreId } }]
        : []),
      {
        type: 'input.accepted',
        data: {
          inputId: command.inputId,
          parts: [...(command.attached ?? command.parts)],
          ...(command.agent && { agent: command.agent }),
          ...(command.model && { model: command.model }),
          delivery: command.delivery ?? 'steer',
          noReply: command.noReply ?? false,
          digest,
          ...(command.message && {
            message: { messageId: command.message.messageId, partIds: [...command.message.partIds] },
          }),
        },
      },
    ],
  }
}
