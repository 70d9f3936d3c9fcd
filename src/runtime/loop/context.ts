import { createHash } from 'node:crypto'
import { z } from 'zod'
import type { EventLog } from '../../events/log.js'
import type { ReadModels } from '../../projections/read-models.js'
import type { TimeTravel } from '../../projections/time-travel/port.js'
import { attachedContents } from './attached-blobs.js'
import { ChronicleError } from '../../events/errors.js'
import type { Message, SessionView } from '../../projections/fold/model.js'
import { DEFAULT_AGENTS, type AgentDefinition } from '../../tools/agents.js'
import type { SkillSource } from '../../tools/skills/skills.js'
import type { Tool, ToolRegistry } from '../../tools/tool.js'
import { toChatMessages, type ChatMessage } from './chat-messages.js'
import { ACCEPTS_ALL, type Accepted, type ModelRequest, type ToolSpec } from '../model/adapter.js'
import {
  buildSystemPrompt,
  defaultEnvironment,
  type ServerInstructions,
  type SystemEnvironment,
} from './system-prompt.js'
import { chainDigest, chainOf, type Transcript } from './transcript.js'

/**
 * Compiles what the model is sent for one step (docs/TRACES.md):
 * system prompt, the history as chat messages, and the tools the agent may
 * use — plus the sha256 digest of that exact request.
 */

export interface ContextDeps {
  readonly agents: ReadonlyMap<string, AgentDefinition>
  readonly tools: ToolRegistry
  readonly environment?: () => SystemEnvironment
  /** the instructions of the MCP servers connected now */
  readonly serverInstructions?: () => readonly ServerInstructions[]
  /** the skills listed in the system prompt, found in the session's directory at each step */
  readonly skills?: SkillSource
}

export interface CompiledContext extends ModelRequest {
  readonly digest: string
  /** the session version whose history `messages` are (recorded on step.started: docs/AUDIT.md) */
  readonly version?: number
  /** what the model was taken to accept when the history was converted */
  readonly accepts?: readonly Accepted[]
  readonly agent: AgentDefinition
  /** the tool implementations behind `tools`, by name */
  readonly toolset: ReadonlyMap<string, Tool>
}

export const MAX_STEPS_NOTE =
  '<system-reminder>\nCRITICAL - MAXIMUM STEPS REACHED. Tools are disabled for this step. ' +
  'Respond with text only: summarise what you did, what remains, and your answer so far.\n</system-reminder>'

/** The message the budget's last step ends its request with. */
export function maxStepsNote(): ChatMessage {
  return { role: 'user', content: [{ type: 'text', text: MAX_STEPS_NOTE }] }
}

/** The latest user message of a view, if any. */
export function latestUser(view: SessionView): Message | undefined {
  let latest: Message | undefined
  for (const m of view.messages.values()) if (m.role === 'user' && (!latest || m.id > latest.id)) latest = m
  return latest
}

/** The agent the session's latest user message asked for (else the session's own). */
export function agentFor(
  view: SessionView,
  agents: ReadonlyMap<string, AgentDefinition>,
  transcript?: Transcript,
): AgentDefinition {
  const user = transcript ? transcript.latest('user') : latestUser(view)
  const name = user?.agent ?? view.session?.agent ?? 'build'
  const agent = agents.get(name)
  if (!agent) throw new ChronicleError('UNKNOWN_AGENT', `unknown agent ${name}`)
  return agent
}

const schemas = new WeakMap<Tool, Record<string, unknown>>()

export function toolSpec(tool: Tool): ToolSpec {
  let parameters = schemas.get(tool)
  if (!parameters) {
    parameters = z.toJSONSchema(tool.parameters, { io: 'input' }) as Record<string, unknown>
    delete parameters.$schema
    schemas.set(tool, parameters)
  }
  return { name: tool.id, description: tool.description, parameters }
}

export interface CompileOptions {
  /** the last step of the budget: tools off, and a note asking for a text answer */
  readonly lastStep?: boolean
  /** the view's maintained transcript (the runtime's); without it the history is converted afresh */
  readonly transcript?: Transcript
  /** what the step's model takes besides text (default: images and PDFs) */
  readonly accepts?: readonly Accepted[]
  /** a blob's content (files read at submit), when converting afresh */
  readonly read?: (hash: string) => string | undefined
}

export async function compileView(
  view: SessionView,
  deps: ContextDeps,
  opts: CompileOptions = {},
): Promise<CompiledContext> {
  const session = view.session
  if (!session) throw new ChronicleError('SESSION_NOT_FOUND', 'no session')
  const agent = agentFor(view, deps.agents, opts.transcript)
  const offered = await deps.tools.tools({ sessionId: session.id, agent: agent.name, rules: session.rules })
  const toolset = new Map(offered.map((t) => [t.id, t]))
  const system = buildSystemPrompt(
    agent,
    session.directory,
    (deps.environment ?? defaultEnvironment)(),
    deps.serverInstructions?.(),
    deps.skills?.list(session.directory),
  )
  let messages: ChatMessage[]
  let chain: string
  const accepts = opts.accepts ?? ACCEPTS_ALL
  if (opts.transcript) ({ messages, chain } = opts.transcript.chat(accepts))
  else {
    messages = toChatMessages(view, { accepts, ...(opts.read && { read: opts.read }) })
    chain = chainOf(messages)
  }
  // read with the messages: a commit during an await below (or before the step starts) changes the view in place
  const version = view.session?.version
  if (opts.lastStep) {
    const note = maxStepsNote()
    messages.push(note)
    chain = chainDigest(chain, note)
  }
  const tools = offered.map(toolSpec)
  const toolChoice = opts.lastStep ? 'none' : 'auto'
  const digest = requestDigest(system, tools, toolChoice, chain)
  return { system, messages, tools, toolChoice, digest, version, accepts, agent, toolset }
}

/**
 * The contextDigest of a request: sha256 over the system prompt, the tools,
 * the tool choice and the digest chain of the messages (each message's JSON
 * hashed onto the previous) — equal requests, equal digests, and a long
 * history's chain is extended, not rehashed, step after step.
 */
export function digestOf(request: ModelRequest): string {
  return requestDigest(request.system, request.tools, request.toolChoice, chainOf(request.messages))
}

export function requestDigest(system: string, tools: readonly ToolSpec[], toolChoice: string, chain: string): string {
  return createHash('sha256')
    .update(JSON.stringify({ system, tools, toolChoice, messages: chain }))
    .digest('hex')
}

/**
 * What the model would be sent for the session's next step — now, or as of
 * event `seq` (time travel: the session exactly as it was after that event).
 */
export async function compileContext(
  ports: { readonly log: EventLog; readonly readModels: ReadModels; readonly timeTravel: TimeTravel },
  sessionId: string,
  seq?: number,
  deps: ContextDeps = { agents: new Map(DEFAULT_AGENTS.map((a) => [a.name, a])), tools: { tools: () => [] } },
): Promise<CompiledContext> {
  let view: SessionView
  if (seq === undefined) {
    view = await ports.readModels.view(sessionId)
    if (!view.session) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${sessionId}`)
  } else {
    view = await ports.timeTravel.viewAt(sessionId, seq)
  }
  return compileView(view, deps, { read: await attachedContents(ports.log.blobs, view) })
}
