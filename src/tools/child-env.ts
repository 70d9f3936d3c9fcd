/**
 * The environment a command the model runs gets (docs/SECURITY.md): an
 * allow-list — enough to find programs and render text — plus what the
 * user's config adds (`sandbox.env` values, `sandbox.passEnv` names). A
 * deny-list cannot know every name a credential hides under
 * (`DATABASE_URL=postgres://u:pass@…` passed the old one), so nothing the
 * server holds reaches a command unless it is named here or by the user.
 */
const ALLOWED = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TERM',
  'TZ',
  'COLORTERM',
  'NO_COLOR',
])
const ALLOWED_PREFIXES = ['LC_']

export interface ChildEnvOptions {
  /** variables to set (the config's `sandbox.env`) */
  readonly set?: Readonly<Record<string, string>>
  /** server variables to pass through as they are (the config's `sandbox.passEnv`) */
  readonly pass?: readonly string[]
}

export function childEnv(base: NodeJS.ProcessEnv, options: ChildEnvOptions = {}): Record<string, string> {
  const pass = new Set(options.pass ?? [])
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined) continue
    if (ALLOWED.has(name) || ALLOWED_PREFIXES.some((p) => name.startsWith(p)) || pass.has(name)) out[name] = value
  }
  return { ...out, ...options.set }
}
