import type { DataOf } from '../../events/catalogue.js'
import { blobHash } from '../../events/blobs.js'
import type { StoredEvent } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'
import type { TimeTravel } from '../../projections/time-travel/port.js'
import type { ModelRequest, ToolSpec } from '../model/adapter.js'
import type { ChatMessage } from '../loop/chat-messages.js'
import { attachedContents, type BlobRead, fetchedBlobs } from '../loop/attached-blobs.js'
import { type ChatOptions, toChatMessages } from '../loop/chat-messages.js'
import { ACCEPTS_ALL } from '../model/adapter.js'
import { digestOf, maxStepsNote, requestDigest } from '../loop/context.js'
import { chainDigest } from '../loop/transcript.js'

/**
 * A step's request rebuilt from the log alone (docs/AUDIT.md): step.started
 * names what it was compiled from — the system prompt and tool schemas as
 * blobs, the history as a session version (or a compaction's messages as a
 * blob), and whether it was the budget's last step. Nothing is read from
 * disk or the clock, so the answer is the same on any machine, any day.
 */

export type CompiledFrom = NonNullable<DataOf<'step.started'>['context']>
export type StepStarted = Extract<StoredEvent, { type: 'step.started' }>

/** A blob step.started names, read back and checked against its hash. */
export function readBlob(read: BlobRead, hash: string): string {
  const content = read(hash)
  if (content === undefined) throw new ChronicleError('BLOB_MISSING', `blob ${hash} is not in the store`)
  if (blobHash(content) !== hash) throw new ChronicleError('BLOB_CORRUPT', `blob ${hash} does not match its hash`)
  return content
}

/** The texts a step's request was compiled from. */
export interface StepSources {
  readonly system: string
  readonly tools: ToolSpec[]
  /** a compaction's request: its own messages, not the history */
  readonly messages?: ChatMessage[]
}

/** `read` reads the blobs `from` names (`sourceBlobs`). */
export function readSources(read: BlobRead, from: CompiledFrom): StepSources {
  return {
    system: readBlob(read, from.system),
    tools: JSON.parse(readBlob(read, from.tools)) as ToolSpec[],
    ...(from.messages !== undefined && { messages: JSON.parse(readBlob(read, from.messages)) as ChatMessage[] }),
  }
}

/** The blobs a step's sources are in. */
export function sourceBlobs(from: CompiledFrom): string[] {
  return [from.system, from.tools, ...(from.messages === undefined ? [] : [from.messages])]
}

/** How the history was converted for the step: for what its model accepts, with the blobs of attached files. */
export function chatOptions(read: BlobRead, from: CompiledFrom): ChatOptions {
  return { accepts: from.accepts ?? ACCEPTS_ALL, read }
}

/** The request, given the history's chat messages at `from.version` (ignored for a compaction's). */
export function requestOf(sources: StepSources, from: CompiledFrom, history: readonly ChatMessage[]): ModelRequest {
  const messages = [...(sources.messages ?? history)]
  if (from.lastStep) messages.push(maxStepsNote())
  return { system: sources.system, messages, tools: sources.tools, toolChoice: from.lastStep ? 'none' : 'auto' }
}

/** The digest of that request, from the history's digest chain (so an audit need not keep the messages). */
export function digestOfSources(sources: StepSources, from: CompiledFrom, historyChain: string): string {
  let chain = historyChain
  if (sources.messages) {
    chain = ''
    for (const m of sources.messages) chain = chainDigest(chain, m)
  }
  if (from.lastStep) chain = chainDigest(chain, maxStepsNote())
  return requestDigest(sources.system, sources.tools, from.lastStep ? 'none' : 'auto', chain)
}

/** The model step a recorded request was sent for. */
export interface SentStep {
  readonly seq: number
  readonly step: number
  readonly messageId: string
  readonly contextDigest: string
  readonly settings?: DataOf<'step.started'>['settings']
}

/**
 * The request sent for the step that event `seq` started, rebuilt from the
 * log — or undefined when `seq` is not one of the session's own
 * step.started events, or one logged before requests were recorded.
 */
export async function recordedRequest(
  ports: { readonly log: EventLog; readonly timeTravel: TimeTravel },
  sessionId: string,
  seq: number,
): Promise<{ request: ModelRequest; digest: string; agent: string; step: SentStep } | undefined> {
  const { log, timeTravel } = ports
  const event = await log.get(seq)
  if (event?.type !== 'step.started' || event.sessionId !== sessionId || !event.data.context) return undefined
  const from = event.data.context
  const sources = readSources(await fetchedBlobs(log.blobs, sourceBlobs(from)), from)
  let history: ChatMessage[] = []
  if (from.version !== undefined) {
    const at = await log.seqOfVersion(sessionId, from.version)
    if (at === undefined) throw new ChronicleError('CORRUPT_EVENT', `event ${seq} names a version its session lacks`)
    const view = await timeTravel.viewAt(sessionId, at)
    history = toChatMessages(view, chatOptions(await attachedContents(log.blobs, view), from))
  }
  const request = requestOf(sources, from, history)
  const { messageId, step, contextDigest, settings } = event.data
  const agent = (await timeTravel.viewAt(sessionId, seq)).messages.get(messageId)?.agent ?? ''
  return {
    request,
    digest: digestOf(request),
    agent,
    step: { seq, step, messageId, contextDigest, ...(settings && { settings }) },
  }
}
