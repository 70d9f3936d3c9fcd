import { ChronicleError } from '../events/errors.js'
import type { IdSource } from '../events/ids.js'
import type { CommandPorts } from '../commands/execute.js'
import { execute } from '../commands/execute.js'
import type { Session } from '../projections/fold/model.js'
import { partsByMessage } from './loop/chat-messages.js'
import { type ModelResolver, readModelStep } from './model/adapter.js'
import { TITLE_SYSTEM } from './model/title-prompt.js'

/**
 * Session titles (docs/EVENTS.md "Titles"). When a session's first run ends
 * idle, and the session still has the default title, a small tool-less
 * model call proposes one from the first exchange. It is a task of its own
 * in the log: `title.started`, then `session.renamed {titleId}` (meta.actor
 * runtime) or `title.failed`. It runs after the run, never inside it: its
 * failure, slowness or a crash in the middle affects no run, and a title the
 * user set meanwhile is never overwritten. Off with config `titles: false`.
 */

export const DEFAULT_TITLE = 'New session'
const MAX_TITLE = 80
const MAX_EXCHANGE = 4000
const TIMEOUT_MS = 30_000

export interface Titles {
  /** after a run ended idle: proposes a title when this was the session's first exchange */
  afterRun(sessionId: string): void
  /** resolves when every title call in flight has ended */
  drain(): Promise<void>
}

export function createTitles(deps: {
  /** where the exchange is read and the title's events append */
  readonly ports: CommandPorts
  readonly ids: IdSource
  readonly models: ModelResolver
  readonly log?: { error(obj: object, msg?: string): void }
}): Titles {
  const { ports, ids } = deps
  const inFlight = new Set<Promise<void>>()

  async function propose(sessionId: string): Promise<void> {
    const untitled = (s: Session | undefined): s is Session =>
      s !== undefined && s.title === DEFAULT_TITLE && !s.parent && !s.imported && !s.forkedFrom
    // the session alone first: most runs end in a session titled already, whose messages need no reading
    if (!untitled(await ports.readModels.session(sessionId))) return
    const view = await ports.readModels.view(sessionId)
    const session = view.session ?? undefined
    if (!untitled(session)) return
    const messages = [...view.messages.values()].sort((a, b) => (a.id < b.id ? -1 : 1))
    if (messages.filter((m) => m.role === 'user').length !== 1) return // the first exchange only
    const parts = partsByMessage(view)
    const textOf = (id: string) =>
      (parts.get(id) ?? [])
        .map((p) => (p.type === 'text' ? p.text : p.type === 'file' ? `[file ${p.path ?? p.filename ?? ''}]` : ''))
        .join('\n')
    const user = messages.find((m) => m.role === 'user')
    const answer = messages
      .filter((m) => m.role === 'assistant' && !m.summary)
      .map((m) => textOf(m.id))
      .join('\n')
    if (!user) return
    const model = deps.models.resolve(user.model ?? session.model ?? null)
    if (!model) return
    const titleId = ids.next('ttl')
    const meta = { actor: 'runtime' as const }
    await execute(
      ports,
      sessionId,
      (s) => (s?.title === DEFAULT_TITLE ? [{ type: 'title.started', data: { titleId, model: model.spec } }] : []),
      {
        meta,
      },
    )
    const fail = (error: string) =>
      execute(ports, sessionId, () => [{ type: 'title.failed', data: { titleId, error } }], { meta })
    let text = ''
    let failure: string | undefined
    const signal = AbortSignal.timeout(TIMEOUT_MS)
    const exchange = `<user>\n${textOf(user.id).slice(0, MAX_EXCHANGE)}\n</user>\n<assistant>\n${answer.slice(0, MAX_EXCHANGE)}\n</assistant>`
    await readModelStep(
      model,
      {
        system: TITLE_SYSTEM,
        messages: [{ role: 'user', content: [{ type: 'text', text: exchange }] }],
        tools: [],
        toolChoice: 'none',
      },
      signal,
      (part) => {
        if (part.type === 'text-delta') text += part.text
        if (part.type === 'error') failure = part.failure.message
        if (part.type === 'aborted') failure = 'the title call timed out'
      },
    )
    const title = clean(text)
    if (failure !== undefined || !title) return void (await fail(failure ?? 'the model proposed no title'))
    // a title the user set while the call ran wins
    await execute(
      ports,
      sessionId,
      (s) =>
        s?.title === DEFAULT_TITLE
          ? [{ type: 'session.renamed', data: { title, titleId } }]
          : [{ type: 'title.failed', data: { titleId, error: 'the session was renamed meanwhile' } }],
      { meta },
    )
  }

  return {
    afterRun(sessionId) {
      const task = propose(sessionId)
        .catch((err: unknown) => {
          // never the run's problem: a closed store at shutdown, a session gone
          if (!(err instanceof ChronicleError && err.code === 'SESSION_NOT_FOUND'))
            deps.log?.error({ err, sessionId }, 'a title could not be proposed')
        })
        .finally(() => inFlight.delete(task))
      inFlight.add(task)
    },
    async drain() {
      await Promise.all([...inFlight])
    },
  }
}

/** The first line, without quotes, a "Title:" label or trailing punctuation, at most MAX_TITLE characters. */
export function clean(text: string): string {
  const line = text.trim().split('\n')[0] ?? ''
  return line
    .replace(/^(title|titel)\s*:\s*/i, '')
    .replace(/^["'“‘`*#\s]+|["'”’`*\s]+$/g, '')
    .replace(/[.!。]+$/, '')
    .slice(0, MAX_TITLE)
    .trim()
}
