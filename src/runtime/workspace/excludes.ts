import { stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { runGit } from './git.js'

/**
 * What a snapshot ignores besides the workspace's `.gitignore` files: the
 * user's global excludes and the repository's own `.git/info/exclude` —
 * what `git status` ignores for the user. The store runs git without the
 * user's config (so no filter, hook or diff setting of theirs applies), so
 * both are handed to `ls-files` explicitly.
 */

/** `--exclude-from` arguments for the files that exist now. */
export async function excludeArgs(globalExcludes: string | undefined, directory: string): Promise<string[]> {
  const files = [globalExcludes, join(directory, '.git', 'info', 'exclude')].filter((f): f is string => !!f)
  const present = await Promise.all(
    files.map((file) =>
      stat(file).then(
        (st) => st.isFile(),
        () => false,
      ),
    ),
  )
  return files.filter((_, i) => present[i]).map((file) => `--exclude-from=${file}`)
}

/**
 * The excludes file git uses for the server's user: `core.excludesFile` from
 * ~/.gitconfig, else `$XDG_CONFIG_HOME/git/ignore` (~/.config/git/ignore).
 */
export async function findGlobalExcludes(gitDir: string): Promise<string | undefined> {
  const home = process.env.HOME
  if (!home) return undefined
  const xdg = process.env.XDG_CONFIG_HOME
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    ...(xdg && { XDG_CONFIG_HOME: xdg }),
  }
  const configured = await runGit(
    ['config', '--global', '--path', '--get', 'core.excludesFile'],
    { gitDir, home, cwd: home },
    undefined,
    env,
  )
  const file = configured.code === 0 ? configured.stdout.toString('utf8').trim() : ''
  return file ? resolve(home, file) : join(xdg || join(home, '.config'), 'git', 'ignore')
}
