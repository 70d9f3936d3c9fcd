import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decideSession } from '../../src/commands/session.js'
import type { DataOf, PermissionRule } from '../../src/events/catalogue.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { checkDecision, createPermissionGate, evaluateChain } from '../../src/runtime/permissions/gate.js'
import { requireSession } from '../../src/projections/queries/read-model.js'
import type { PermissionAsk, ToolContext } from '../../src/tools/tool.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/** A real temp directory (realpath'd: macOS /tmp is a symlink), removed by the returned cleanup. */
export function tempDir(prefix = 'chronicle-tools-'): { dir: string; cleanup: () => void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), prefix)))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

export interface Fixture {
  readonly store: EventStore
  readonly sessionId: string
  readonly gate: ReturnType<typeof createPermissionGate>
  readonly ids: ReturnType<typeof sequentialIds>
  events(types?: readonly string[]): StoredEvent[]
  /** the data of every permission.requested so far */
  requested(): DataOf<'permission.requested'>[]
  ctx(overrides?: Partial<ToolContext> & { agent?: string }): ToolContext & { progressed: Record<string, unknown>[] }
}

/** A real in-memory store with one session, the default agents (plus extra agent rules) and a real gate. */
export function fixture(opts: {
  directory: string
  agent?: string
  rules?: PermissionRule[]
  agentRules?: PermissionRule[]
}): Fixture {
  const store = openStore(':memory:')
  const ids = sequentialIds()
  const sessionId = 'ses_test'
  const agent = opts.agent ?? 'build'
  executeNow(
    store,
    sessionId,
    (s) =>
      decideSession(
        { type: 'create', directory: opts.directory, agent, model: null, ...(opts.rules && { rules: opts.rules }) },
        s,
        sessionId,
      ),
    { meta: { actor: 'user' } },
  )
  const agents = resolveAgents(opts.agentRules ? [{ name: agent, rules: opts.agentRules }] : [])
  const gate = createPermissionGate({ ports: sqlitePorts(store), ids, agents })
  return {
    store,
    sessionId,
    gate,
    ids,
    events: (types) => store.readSession(sessionId).filter((e) => !types || types.includes(e.type)),
    requested: () => store.readSession(sessionId).flatMap((e) => (e.type === 'permission.requested' ? [e.data] : [])),
    ctx(overrides = {}) {
      const progressed: Record<string, unknown>[] = []
      const abort = overrides.abort ?? new AbortController().signal
      const scope = {
        sessionId,
        agent: overrides.agent ?? agent,
        messageId: 'msg_1',
        callId: 'call_1',
        partId: 'prt_1',
        abort,
      }
      return {
        sessionId,
        messageId: 'msg_1',
        callId: 'call_1',
        partId: 'prt_1',
        agent: scope.agent,
        directory: opts.directory,
        abort,
        progress: (m) => progressed.push(m),
        ask: (request: PermissionAsk) => gate.ask(scope, request),
        // the gate's own decision, over the session as SQLite has it now (a tool's check is synchronous)
        check: (request: PermissionAsk) =>
          checkDecision(
            evaluateChain(agents, [{ session: requireSession(store, sessionId), agent: scope.agent }], request),
            request,
          ),
        progressed,
        ...overrides,
      }
    },
  }
}
