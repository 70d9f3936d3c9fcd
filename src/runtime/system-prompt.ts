import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import type { AgentDefinition } from '../tools/agents.js'

/**
 * The system prompt (DESIGN §6): the agent's prompt, the environment, the
 * project's instructions — AGENTS.md (CLAUDE.md as a fallback) in every
 * directory from the session's directory up to the repository root — and the
 * instructions of the connected MCP servers.
 */

export interface SystemEnvironment {
  readonly platform: string
  /** the date the model is told; injected so that requests are reproducible */
  readonly date: string
}

export function defaultEnvironment(now: Date = new Date()): SystemEnvironment {
  return { platform: process.platform, date: now.toISOString().slice(0, 10) }
}

/** What a connected MCP server asks of the model (its `instructions` at initialize). */
export interface ServerInstructions {
  readonly server: string
  readonly text: string
}

export function buildSystemPrompt(
  agent: AgentDefinition,
  directory: string,
  env: SystemEnvironment,
  servers: readonly ServerInstructions[] = [],
): string {
  const repoRoot = findRepoRoot(directory)
  const sections = [
    agent.prompt,
    [
      '<env>',
      `Working directory: ${directory}`,
      `Is directory a git repo: ${repoRoot ? 'yes' : 'no'}`,
      `Platform: ${env.platform}`,
      `Today's date: ${env.date}`,
      '</env>',
    ].join('\n'),
    ...instructions(directory, repoRoot),
    ...servers.map((s) => `Instructions from MCP server ${s.server}:\n${s.text.slice(0, MAX_INSTRUCTION_BYTES)}`),
  ]
  return sections.join('\n\n')
}

/** The nearest ancestor (or self) holding `.git`, if any. */
export function findRepoRoot(directory: string): string | undefined {
  let dir = resolve(directory)
  for (;;) {
    if (existsSync(join(dir, '.git'))) return dir
    const up = dirname(dir)
    if (up === dir) return undefined
    dir = up
  }
}

const MAX_INSTRUCTION_BYTES = 64 * 1024

/** Instruction files from the repository root down to the directory (outer first). */
function instructions(directory: string, repoRoot: string | undefined): string[] {
  const dirs: string[] = []
  let dir = resolve(directory)
  const stop = repoRoot ?? dir
  for (;;) {
    dirs.unshift(dir)
    if (dir === stop) break
    const up = dirname(dir)
    if (up === dir) break
    dir = up
  }
  const out: string[] = []
  for (const d of dirs) {
    const file = ['AGENTS.md', 'CLAUDE.md'].map((name) => join(d, name)).find(isFile)
    if (!file) continue
    const text = readFileSync(file, 'utf8').slice(0, MAX_INSTRUCTION_BYTES)
    out.push(`Instructions from: ${file}\n${text}`)
  }
  return out
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}
