import type { PermissionRule } from '../../events/catalogue.js'
import type { IdSource } from '../../events/ids.js'
import type { CommandPorts } from '../../commands/execute.js'
import { type AgentDefinition, resolveAgents } from '../../tools/agents.js'
import { createBuiltinTools, type TodoItem } from '../../tools/builtin/index.js'
import type { McpServerConfig } from '../../tools/mcp/config.js'
import { createMcpManager, type McpManager } from '../../tools/mcp/manager.js'
import type { McpServerStatus } from '../../tools/mcp/server.js'
import { createPermissionGate, type PermissionGateHandle } from '../permissions/gate.js'
import { createToolRegistry } from './registry.js'
import type { Tool, ToolRegistry } from '../../tools/tool.js'

export interface ToolingOptions {
  /** what the permission gate reads and appends through, and todowrite records on */
  readonly ports: CommandPorts
  readonly ids: IdSource
  /** where truncated outputs are saved (<dataDir>/tool-output) */
  readonly dataDir: string
  /** configured agents and the config file's global rules (default: the built-in agents) */
  readonly agents?: readonly Partial<AgentDefinition>[]
  readonly rules?: readonly PermissionRule[]
  readonly mcp?: readonly McpServerConfig[]
  readonly onMcpStatus?: (status: McpServerStatus) => void
  /** extra tools (e.g. the runtime's task tool) offered after the built-ins */
  readonly extraTools?: readonly Tool[]
  /** how todowrite records todo.updated; default: enqueue it on the session (actor tool) */
  readonly updateTodos?: (sessionId: string, items: TodoItem[]) => Promise<void> | void
  readonly env?: NodeJS.ProcessEnv
}

export interface Tooling {
  readonly agents: Map<string, AgentDefinition>
  readonly gate: PermissionGateHandle
  readonly registry: ToolRegistry & { all(): readonly Tool[] }
  readonly mcp: McpManager
  /** connects the MCP servers (never rejects: failures are statuses) */
  start(): Promise<void>
  close(): Promise<void>
}

/**
 * Everything the runtime needs from src/tools in one call, for the
 * composition root: agents, the permission gate, built-in + MCP tools in a
 * registry.
 */
export function createTooling(options: ToolingOptions): Tooling {
  const { ports, ids } = options
  const agents = resolveAgents(options.agents ?? [], options.rules ?? [])
  const gate = createPermissionGate({ ports, ids, agents })
  const mcp = createMcpManager(options.mcp ?? [], {
    dataDir: options.dataDir,
    ...(options.onMcpStatus && { onStatus: options.onMcpStatus }),
  })
  const updateTodos =
    options.updateTodos ??
    (async (sessionId: string, items: TodoItem[]) => {
      await ports.log.enqueue(sessionId, [{ type: 'todo.updated', data: { items } }], { meta: { actor: 'tool' } })
    })
  const builtins = createBuiltinTools({
    dataDir: options.dataDir,
    updateTodos,
    ...(options.env && { env: options.env }),
  })
  const registry = createToolRegistry({ agents, mcp, tools: [...builtins, ...(options.extraTools ?? [])] })
  return {
    agents,
    gate,
    registry,
    mcp,
    start: () => mcp.start(),
    async close() {
      gate.close()
      await mcp.close()
    },
  }
}

export type { McpServerConfig, McpServerStatus, TodoItem }
