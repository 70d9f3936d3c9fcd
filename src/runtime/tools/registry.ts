import type { PermissionRule } from '../../events/catalogue.js'
import type { AgentDefinition } from '../../tools/agents.js'
import { deniesEverything } from '../../tools/permission/evaluate.js'
import type { Tool, ToolRegistry } from '../../tools/tool.js'

/** Anything that contributes tools that may change over time (the MCP manager). */
export interface ToolSource {
  tools(): readonly Tool[]
}

export interface ToolRegistryDeps {
  readonly agents: ReadonlyMap<string, AgentDefinition>
  /** built-in tools (see createBuiltinTools) */
  readonly tools: readonly Tool[]
  readonly mcp?: ToolSource
}

/**
 * The tools offered to an agent in a session, recomputed every step: built-ins
 * then MCP tools (a name clash keeps the built-in), minus those whose agent
 * and session rules (the scope's: the session as the step sees it, or as it
 * was at a seq) deny everything for their permission. Durable approvals
 * never un-hide a tool: they cannot override a configured deny.
 */
export function createToolRegistry(deps: ToolRegistryDeps): ToolRegistry & { all(): readonly Tool[] } {
  const all = (): Tool[] => {
    const seen = new Set<string>()
    const out: Tool[] = []
    for (const tool of [...deps.tools, ...(deps.mcp?.tools() ?? [])]) {
      if (seen.has(tool.id)) continue
      seen.add(tool.id)
      out.push(tool)
    }
    return out
  }
  return {
    all,
    tools({ agent, rules }) {
      const agentRules = deps.agents.get(agent)?.rules ?? []
      const sessionRules: readonly PermissionRule[] = rules ?? []
      return all().filter((tool) => !deniesEverything(tool.permission ?? tool.id, agentRules, sessionRules))
    },
  }
}
