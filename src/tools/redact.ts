/**
 * Secrets never enter the log (docs/SECURITY.md). The server knows its own
 * secret values — its token, its API keys, the values of the environment
 * variables it keeps from child processes, credentials inside URLs — and
 * replaces every exact occurrence with `[redacted:NAME]` in what tools
 * return before it is appended: outputs, progress, MCP results, file
 * contents. Values shorter than MIN_SECRET are left alone: they would match
 * ordinary text.
 */

export const MIN_SECRET = 8

export interface Secret {
  readonly name: string
  readonly value: string
}

/** Names that hold credentials, and prefixes of variables that configure a service's access. */
const SECRET_NAME = /(KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT)/i
const SERVICE_PREFIXES = [
  'CHRONICLE_',
  'OPENAI_',
  'ANTHROPIC_',
  'AWS_',
  'AZURE_',
  'GOOGLE_',
  'GCP_',
  'GITHUB_',
  'GH_',
  'NPM_CONFIG_',
  'HF_',
]
const URL_CREDENTIALS = /[a-z][a-z0-9+.-]*:\/\/([^/\s:@]*):([^/\s@]+)@/gi

/** Whether a variable's name says its value is a credential. */
export function isSecretName(name: string): boolean {
  return SECRET_NAME.test(name) || SERVICE_PREFIXES.some((p) => name.toUpperCase().startsWith(p))
}

/** The secret values an environment holds: credential-named variables, and passwords inside URLs (`DATABASE_URL`). */
export function secretsOf(env: NodeJS.ProcessEnv): Secret[] {
  const out: Secret[] = []
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue
    if (isSecretName(name)) out.push({ name, value })
    for (const [, user, password] of value.matchAll(URL_CREDENTIALS)) {
      out.push({ name: `${name}:password`, value: password as string })
      out.push({ name: `${name}:credentials`, value: `${user}:${password}@` })
    }
  }
  return out
}

export interface Redactor {
  /** the text with every known secret value replaced */
  text(text: string): string
  /** strings inside a JSON-like value redacted, the rest unchanged */
  value<T>(value: T): T
  /** a redactor for text that arrives in pieces: a secret split across two pieces is still caught */
  stream(): RedactingStream
  /** secrets the server comes to hold while it runs (an MCP server's OAuth tokens): redacted from now on */
  learn(secrets: readonly Secret[]): void
}

export interface RedactingStream {
  /** what can be passed on now (a tail that could begin a secret is held back) */
  push(piece: string): string
  /** the rest, at the end of the stream */
  end(): string
}

export function createRedactor(secrets: readonly Secret[]): Redactor {
  const byValue = new Map<string, string>()
  let longest = 0
  let pattern: RegExp | undefined
  const add = (list: readonly Secret[]): boolean => {
    const before = byValue.size
    for (const s of list) if (s.value.length >= MIN_SECRET && !byValue.has(s.value)) byValue.set(s.value, s.name)
    if (byValue.size === before) return false
    // Longest first, so a secret that contains another is replaced whole.
    const ordered = [...byValue.entries()].sort((a, b) => b[0].length - a[0].length)
    longest = ordered[0]?.[0].length ?? 0
    pattern = new RegExp(ordered.map(([v]) => escapeRegExp(v)).join('|'), 'g')
    return true
  }
  add(secrets)

  const text = (input: string): string =>
    pattern && input.length >= MIN_SECRET ? input.replace(pattern, (v) => `[redacted:${byValue.get(v)}]`) : input

  const value = <T>(input: T): T => {
    if (!pattern) return input
    if (typeof input === 'string') return text(input) as T
    if (Array.isArray(input)) return input.map(value) as T
    if (input && typeof input === 'object')
      return Object.fromEntries(Object.entries(input).map(([k, v]) => [k, value(v)])) as T
    return input
  }

  const stream = (): RedactingStream => {
    let held = ''
    return {
      push(piece) {
        if (!pattern) return piece
        const all = text(held + piece)
        // Keep back what could still grow into a secret with the next piece (never half a surrogate pair).
        let cut = Math.max(0, all.length - (longest - 1))
        if (cut > 0 && isHighSurrogate(all.charCodeAt(cut - 1))) cut--
        held = all.slice(cut)
        return all.slice(0, cut)
      },
      end() {
        const rest = text(held)
        held = ''
        return rest
      },
    }
  }

  return { text, value, stream, learn: (list) => void add(list) }
}

/** A redactor that knows no secrets (tests, tools built without one); it learns none either, being shared. */
export const NO_SECRETS: Redactor = { ...createRedactor([]), learn: () => {} }

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
