import { existsSync, realpathSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { readInside } from '../../tools/read-inside.js'
import { skillsSection } from '../../tools/skills/skill-listing.js'
import type { SkillListing } from '../../tools/skills/skills.js'
import type { AgentDefinition } from '../../tools/agents.js'

/**
 * The system prompt (docs/TRACES.md): the agent's prompt, the environment,
 * the project's instructions — AGENTS.md (CLAUDE.md as a fallback) in every
 * directory from the session's directory up to the repository root — and the
 * instructions of the connected MCP servers, then the skills found (names and
 * descriptions: src/tools/skills/skills.ts). An instruction file is read only
 * when its real path lies inside the repository (or the session directory
 * outside one): a symlinked AGENTS.md cannot pull a file from elsewhere on
 * the machine into what the model is told (docs/SECURITY.md). The check is of
 * the file opened: a workspace process may swap the name at any moment.
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
  skills?: SkillListing,
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
    ...(skills ? [skillsSection(skills)].filter((s) => s !== undefined) : []),
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
  const root = realOrSelf(stop)
  for (const d of dirs) {
    for (const file of [join(d, 'AGENTS.md'), join(d, 'CLAUDE.md')]) {
      const read = readInside(root, file, MAX_INSTRUCTION_BYTES)
      if (read === undefined) continue
      out.push(`Instructions from: ${file}\n${read.text}`)
      break
    }
  }
  return out
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}
