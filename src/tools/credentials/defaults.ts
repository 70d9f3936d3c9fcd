import { join } from 'node:path'

/**
 * Where the user's credentials live, hidden from every tool by default
 * (docs/SECURITY.md "What the sandbox hides"). A confined command's output
 * goes to the model provider, and a prompt-injected model only has to ask for
 * `cat ~/.ssh/id_ed25519`; so these are mounted over in the sandbox and the
 * file tools ask `credentials` before touching them. The user's config adds
 * paths (`sandbox.hide`) and takes them back (`sandbox.reveal`).
 *
 * `base` says which directory a path is under: the home directory, the XDG
 * config home (`~/.config`) or the XDG data home (`~/.local/share`). Programs
 * differ in whether they follow `$XDG_CONFIG_HOME`, so a path under an XDG
 * home is hidden under both the default and the configured one.
 */
export interface DefaultHiddenPath {
  readonly base: 'home' | 'config' | 'data'
  /** relative to the base; `*` and `?` match within one path segment */
  readonly path: string
  /** why it is hidden (docs/SECURITY.md lists these) */
  readonly why: string
}

export const DEFAULT_HIDDEN_PATHS: readonly DefaultHiddenPath[] = [
  { base: 'home', path: '.ssh', why: 'SSH private keys, agent sockets, known hosts' },
  { base: 'home', path: '.gnupg', why: 'GnuPG private keys and the agent socket' },
  { base: 'home', path: '.aws', why: 'AWS access keys and SSO tokens' },
  { base: 'home', path: '.azure', why: 'Azure CLI tokens' },
  { base: 'config', path: 'gcloud', why: 'Google Cloud credentials' },
  { base: 'home', path: '.kube', why: 'Kubernetes cluster credentials' },
  { base: 'home', path: '.docker', why: 'container registry logins (config.json)' },
  { base: 'home', path: '.netrc', why: 'passwords for curl, git, ftp' },
  { base: 'home', path: '.git-credentials', why: "git's stored HTTPS passwords and tokens" },
  { base: 'config', path: 'gh', why: 'the GitHub CLI token' },
  { base: 'home', path: '.npmrc', why: 'npm registry tokens' },
  { base: 'home', path: '.pypirc', why: 'PyPI upload tokens' },
  { base: 'home', path: '.cargo/credentials*', why: 'crates.io tokens (credentials, credentials.toml)' },
  { base: 'home', path: '.password-store', why: 'pass, the password store' },
  { base: 'home', path: '.mozilla', why: 'Firefox profiles: cookies, saved passwords' },
  { base: 'home', path: 'snap/firefox/common/.mozilla', why: 'Firefox profiles (snap)' },
  { base: 'config', path: 'google-chrome', why: 'Chrome profiles: cookies, saved passwords' },
  { base: 'config', path: 'chromium', why: 'Chromium profiles' },
  { base: 'config', path: 'BraveSoftware', why: 'Brave profiles' },
  { base: 'config', path: 'microsoft-edge', why: 'Edge profiles' },
  { base: 'data', path: 'keyrings', why: 'the desktop keyring (GNOME Keyring)' },
  { base: 'data', path: 'kwalletd', why: 'the desktop keyring (KDE Wallet)' },
]

export interface Homes {
  readonly home: string
  /** `$XDG_CONFIG_HOME` when set (absolute) */
  readonly configHome?: string
  /** `$XDG_DATA_HOME` when set (absolute) */
  readonly dataHome?: string
}

/** The default hidden paths as absolute patterns, for this user's home and XDG directories. */
export function defaultHiddenPatterns(homes: Homes): string[] {
  const under = {
    home: [homes.home],
    config: unique([join(homes.home, '.config'), homes.configHome]),
    data: unique([join(homes.home, '.local', 'share'), homes.dataHome]),
  }
  return DEFAULT_HIDDEN_PATHS.flatMap((d) => under[d.base].map((base) => join(base, d.path)))
}

function unique(paths: readonly (string | undefined)[]): string[] {
  return [...new Set(paths.filter((p): p is string => p !== undefined))]
}
