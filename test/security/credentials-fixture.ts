import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/**
 * A fake HOME holding one secret in each place the user's credentials live
 * (src/tools/credentials/defaults.ts), plus what `sandbox.hide` adds, and a
 * workspace with a symlink to each secret. It lies under /var/tmp, not /tmp:
 * the sandbox mounts its own empty /tmp, which would hide a HOME there
 * whatever the credential rules said — and the reveal half of each spec must
 * be able to see it.
 */

/** `[path under HOME, the entry of the config that hides it]` — one row per kind of credential. */
export const CREDENTIALS: readonly (readonly [string, string])[] = [
  ['.ssh/id_ed25519', '~/.ssh'],
  ['.gnupg/private-keys-v1.d/key.key', '~/.gnupg'],
  ['.aws/credentials', '~/.aws'],
  ['.azure/msal_token_cache.json', '~/.azure'],
  ['.config/gcloud/application_default_credentials.json', '~/.config/gcloud'],
  ['.kube/config', '~/.kube'],
  ['.docker/config.json', '~/.docker'],
  ['.netrc', '~/.netrc'],
  ['.git-credentials', '~/.git-credentials'],
  ['.config/gh/hosts.yml', '~/.config/gh'],
  ['.npmrc', '~/.npmrc'],
  ['.pypirc', '~/.pypirc'],
  ['.cargo/credentials.toml', '~/.cargo/credentials*'],
  ['.password-store/mail/me.txt', '~/.password-store'],
  ['.mozilla/firefox/abc.default/logins.json', '~/.mozilla'],
  ['.config/google-chrome/Default/Cookies', '~/.config/google-chrome'],
  ['.config/chromium/Default/Cookies', '~/.config/chromium'],
  ['.local/share/keyrings/login.keyring', '~/.local/share/keyrings'],
  // not a default: the user's `sandbox.hide` adds it
  ['.config/op/config', '~/.config/op'],
]

/** What the user's config adds to the defaults. */
export const USER_HIDE = ['~/.config/op']

/** Files beside the secrets that stay visible: a command that shows these ran, and saw HOME. */
export const VISIBLE: readonly (readonly [string, string])[] = [
  ['notes.txt', 'VISIBLE-NOTES'],
  ['.cargo/config.toml', 'VISIBLE-CARGO-CONFIG'], // beside ~/.cargo/credentials*, which the glob alone covers
  ['.config/other/settings.json', 'VISIBLE-OTHER-CONFIG'],
]

export interface CredentialHome {
  readonly root: string
  readonly home: string
  readonly workspace: string
  /** the secret text of row i */
  secret(i: number): string
  /** the absolute path of row i's file */
  file(i: number): string
  /** the workspace symlink to row i's file */
  link(i: number): string
  cleanup(): void
}

/** Made in a new directory under /var/tmp, or in `root` (its `home` and `workspace`, made if missing). */
export function credentialHome(root = realpathSync(mkdtempSync('/var/tmp/chronicle-credentials-'))): CredentialHome {
  const home = join(root, 'home')
  const workspace = join(root, 'workspace')
  const tag = `${process.pid}${Date.now().toString(36)}`
  const secret = (i: number) => `SECRET-${i}-${tag}`
  mkdirSync(workspace, { recursive: true })
  for (const [i, [path]] of CREDENTIALS.entries()) {
    mkdirSync(dirname(join(home, path)), { recursive: true })
    writeFileSync(join(home, path), `${secret(i)}\n`)
    symlinkSync(join(home, path), join(workspace, `link-${i}`))
  }
  for (const [path, text] of VISIBLE) {
    mkdirSync(dirname(join(home, path)), { recursive: true })
    writeFileSync(join(home, path), `${text}\n`)
  }
  return {
    root,
    home,
    workspace,
    secret,
    file: (i) => join(home, (CREDENTIALS[i] as readonly [string, string])[0]),
    link: (i) => join(workspace, `link-${i}`),
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  }
}

/** Every secret of the table that `text` holds, by row. */
export function leaked(h: CredentialHome, text: string): number[] {
  return CREDENTIALS.flatMap((_, i) => (text.includes(h.secret(i)) ? [i] : []))
}
