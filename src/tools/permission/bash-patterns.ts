import type { PermissionAsk } from '../tool.js'
import { splitShellCommand } from './shell-split.js'

export interface ExpandedPatterns {
  readonly patterns: string[]
  /** false when some command could not be followed: never auto-allow */
  readonly complete: boolean
  /** some command's name is known only when the shell runs: ask whenever any deny or ask rule exists */
  readonly dynamic: boolean
}

/** bash patterns are commands: every simple command of a compound command is checked (see shell-split). */
export function expandPatterns(request: PermissionAsk): ExpandedPatterns {
  if (request.permission !== 'bash') return { patterns: [...request.patterns], complete: true, dynamic: false }
  const patterns: string[] = []
  let complete = true
  let dynamic = false
  for (const command of request.patterns) {
    const split = splitShellCommand(command)
    complete &&= split.complete
    dynamic ||= split.dynamic
    patterns.push(...split.commands)
    // Unparseable text is also checked whole, so a deny on it still applies.
    if (!split.complete) patterns.push(command.replace(/\s+/g, ' ').trim())
  }
  return { patterns: [...new Set(patterns)], complete, dynamic }
}

/**
 * What "always" approves when the tool did not say: for bash, each
 * simple command's prefix by arity (OpenCode's BashArity), e.g. `git clean *`
 * for `git clean -fd`, `npm run *` → `npm run build *`, `ls *` for `ls -la`.
 */
export function defaultAlways(request: PermissionAsk): readonly string[] {
  if (request.permission !== 'bash') return request.patterns
  const prefixes = expandPatterns(request).patterns.map((command) => {
    const words = command.split(' ')
    const program = (words[0] ?? '').split('/').at(-1) ?? '' // a path pattern (`/usr/bin/git status`) counts like its program
    let arity = ARITY[program] ?? 1
    if (arity === 2 && (words[1] === 'run' || words[1] === 'exec') && RUNNERS.has(program)) arity = 3
    const head: string[] = []
    for (const w of words.slice(0, arity)) {
      if (head.length > 0 && w.startsWith('-')) break // flags are not part of the prefix
      head.push(w)
    }
    return `${head.join(' ')} *`
  })
  return [...new Set(prefixes)]
}

/** How many leading words name the action: programs whose first argument is a subcommand. */
const ARITY: Record<string, number> = Object.fromEntries(
  [
    'git',
    'npm',
    'pnpm',
    'yarn',
    'bun',
    'deno',
    'cargo',
    'go',
    'docker',
    'podman',
    'kubectl',
    'helm',
    'gh',
    'pip',
    'pip3',
    'poetry',
    'uv',
    'apt',
    'apt-get',
    'brew',
    'systemctl',
    'terraform',
    'dotnet',
    'mvn',
    'gradle',
    'composer',
    'rustup',
  ].map((p) => [p, 2]),
)
const RUNNERS = new Set(['npm', 'pnpm', 'yarn', 'bun', 'deno', 'uv', 'poetry'])
