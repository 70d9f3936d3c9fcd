import { closeSync, constants, existsSync, fstatSync, openSync, readSync, realpathSync, statSync } from 'node:fs'
import { realPathOfOpened } from '../../tools/opened-path.js'
import { StringDecoder } from 'node:string_decoder'
import { dirname, join, resolve, sep } from 'node:path'
import type { AgentDefinition } from '../../tools/agents.js'

/**
 * The system prompt (docs/TRACES.md): the agent's prompt, the environment,
 * the project's instructions — AGENTS.md (CLAUDE.md as a fallback) in every
 * directory from the session's directory up to the repository root — and the
 * instructions of the connected MCP servers. An instruction file is read only
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
  const root = realOrSelf(stop)
  for (const d of dirs) {
    for (const file of [join(d, 'AGENTS.md'), join(d, 'CLAUDE.md')]) {
      const text = readInside(root, file)
      if (text === undefined) continue
      out.push(`Instructions from: ${file}\n${text}`)
      break
    }
  }
  return out
}

/**
 * The head of `path` when it is a regular file inside `root`, else undefined.
 * Opened first, then checked through the descriptor (src/tools/opened-path.ts):
 * where the file opened is must be inside, so a name swapped between a check
 * and the read — to a link out of the repository, to a FIFO — is refused,
 * never read. O_NONBLOCK: a FIFO swapped in opens at once (and is refused)
 * instead of stalling the server on open.
 */
function readInside(root: string, path: string): string | undefined {
  if (!isFile(path)) return undefined // most directories have none: answered without opening anything
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY)
  } catch {
    return undefined // gone since, or not readable
  }
  try {
    const opened = fstatSync(fd)
    if (!opened.isFile()) return undefined
    const real = realPathOfOpened(fd, path, opened)
    if (real === undefined || !within(root, real)) return undefined
    const buf = Buffer.allocUnsafe(MAX_INSTRUCTION_BYTES) // only the bytes read are decoded (a file may be huge)
    return new StringDecoder('utf8').write(buf.subarray(0, readSync(fd, buf, 0, MAX_INSTRUCTION_BYTES, 0)))
  } catch {
    return undefined // swapped away while checked
  } finally {
    closeSync(fd)
  }
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

function within(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep)
}

/** Asked at every step for files most directories lack: a missing one is an answer, not a thrown error (~7 µs each). */
function isFile(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() ?? false
  } catch {
    return false // not a directory on the way, no permission
  }
}
