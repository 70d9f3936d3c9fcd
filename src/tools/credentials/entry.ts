import { join } from 'node:path'

/**
 * One `sandbox.hide` / `sandbox.reveal` entry of the user's config
 * (docs/SECURITY.md "What the sandbox hides"): an absolute path or one under
 * the home directory (`~/…`), whose segments may hold `*` and `?` (within one
 * segment: `~/.cargo/credentials*`). What it names is decided when a command
 * runs or a tool opens a path, so a file created later is covered too.
 */

/** Why an entry cannot be used, or undefined when it can. */
export function entryProblem(entry: string): string | undefined {
  if (entry !== '~' && !entry.startsWith('/') && !entry.startsWith('~/'))
    return 'must be an absolute path or start with ~/ (e.g. "~/.config/op")'
  const segments = entry.split('/').slice(1)
  if (segments.some((s) => s === '.' || s === '..')) return 'may not hold "." or ".." segments'
  if (segments.some((s) => s.includes('**'))) return '"**" is not supported: * matches within one path segment'
  if (entry === '/' || /^\/+$/.test(entry)) return '"/" would hide the whole filesystem'
  if (entry.includes('\0')) return 'may not hold a NUL character'
  return undefined
}

/** The entry as an absolute pattern: `~` is `home`; repeated and trailing slashes go. */
export function expandEntry(entry: string, home: string): string {
  const absolute = entry === '~' ? home : entry.startsWith('~/') ? join(home, entry.slice(2)) : entry
  const normal = absolute.replace(/\/+/g, '/')
  return normal.length > 1 ? normal.replace(/\/$/, '') : normal
}

/** Whether a path the pattern names could be `path` or lie inside it (segments compared, wildcards matching). */
export function patternMayReach(pattern: string, path: string): boolean {
  const p = pattern.split('/').filter((s) => s !== '')
  const d = path.split('/').filter((s) => s !== '')
  return p.length >= d.length && d.every((name, i) => segmentMatches(name, p[i] as string))
}

/** Whether a pattern segment holds a wildcard. */
export function isGlob(segment: string): boolean {
  return segment.includes('*') || segment.includes('?')
}

/** Matches one path segment against one pattern segment (`*`: any run, `?`: one character; never a `/`). */
export function segmentMatches(name: string, pattern: string): boolean {
  if (!isGlob(pattern)) return name === pattern
  // iterative wildcard match with one backtrack point: linear in practice, no regex
  let n = 0
  let p = 0
  let star = -1
  let mark = 0
  while (n < name.length) {
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === name[n])) {
      n++
      p++
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++
      mark = n
    } else if (star >= 0) {
      p = star + 1
      n = ++mark
    } else return false
  }
  while (p < pattern.length && pattern[p] === '*') p++
  return p === pattern.length
}
