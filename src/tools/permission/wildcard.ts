/**
 * Wildcard patterns for permission rules (OpenCode's `Wildcard.match`):
 * `*` matches any run of characters (slashes included), `?` one character,
 * and a trailing ` *` is optional so `ls *` also matches a bare `ls`.
 * Backslashes are normalised to `/` on both sides.
 */
const cache = new Map<string, RegExp>()

export function wildcardMatch(value: string, pattern: string): boolean {
  let re = cache.get(pattern)
  if (!re) {
    let source = normalise(pattern)
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')
    if (source.endsWith(' .*')) source = `${source.slice(0, -3)}( .*)?`
    re = new RegExp(`^${source}$`, 's')
    if (cache.size > 1000) cache.clear()
    cache.set(pattern, re)
  }
  return re.test(normalise(value))
}

function normalise(s: string): string {
  return s.replaceAll('\\', '/')
}
