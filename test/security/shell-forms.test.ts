import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { PermissionRule } from '../../src/events/catalogue.js'
import { createBashTool } from '../../src/tools/builtin/bash.js'
import { expandPatterns } from '../../src/tools/permission/bash-patterns.js'
import { wildcardMatch } from '../../src/tools/permission/wildcard.js'
import { ToolFailure } from '../../src/tools/tool.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'

/**
 * Hostile shell forms. The session allows every command except `rm *`; the
 * model wants the file `f` gone. Each row is one way to spell "delete f" in
 * bash, run through the real bash tool and the real permission gate in a
 * real directory holding `f`. Safe means: the call is denied, or it asks
 * (and the ask is refused), and `f` is still there.
 *
 * Each row also says what the parser makes of it:
 *  - `rm`: some pattern matches `rm *`, so the deny rule denies it;
 *  - `dynamic`: a command name is known only when bash runs (`$x f`,
 *    `… | sh`), so with any deny or ask rule around the gate asks — these
 *    rows depend on the gate consuming `dynamic`;
 *  - `incomplete`: the text could not be followed, so it is never
 *    auto-allowed and the gate asks.
 */
type Parsed = 'rm' | 'dynamic' | 'incomplete'

const RULES: PermissionRule[] = [
  { permission: 'bash', pattern: '*', action: 'allow' },
  { permission: 'bash', pattern: 'rm *', action: 'deny' },
]

const HOSTILE: readonly { command: string; parsed: Parsed }[] = [
  // Forms that deleted the file with the old hand-written splitter.
  { command: '/bin/rm f', parsed: 'rm' },
  { command: '\\rm f', parsed: 'rm' },
  { command: '"rm" f', parsed: 'rm' },
  { command: 'r\\m f', parsed: 'rm' },
  { command: 'command rm f', parsed: 'rm' },
  { command: 'env rm f', parsed: 'rm' },
  { command: 'time rm f', parsed: 'rm' },
  { command: '! rm f', parsed: 'rm' },
  { command: 'if true; then rm f; fi', parsed: 'rm' },
  { command: 'for i in 1; do rm f; done', parsed: 'rm' },
  { command: 'echo $(( $(rm f) ))', parsed: 'rm' },
  { command: 'bash -lc "rm f"', parsed: 'rm' },
  { command: 'eval "rm f"', parsed: 'rm' },
  { command: 'x=rm; $x f', parsed: 'dynamic' },
  { command: '>/dev/null rm f', parsed: 'rm' },
  { command: 'find . -name f -delete', parsed: 'rm' },
  { command: 'echo f | xargs rm', parsed: 'rm' },
  // Names spelled through paths, quotes and escapes.
  { command: "'/bin/rm' f", parsed: 'rm' },
  { command: '"r"m f', parsed: 'rm' },
  { command: "$'\\x72\\x6d' f", parsed: 'rm' },
  { command: '$"rm" f', parsed: 'rm' },
  { command: 'r\\\nm f', parsed: 'rm' },
  { command: 'A=1 B=2 rm f', parsed: 'rm' },
  // Wrappers that run the command in their arguments.
  { command: '/usr/bin/env rm f', parsed: 'rm' },
  { command: 'env -i PATH=/usr/bin:/bin rm f', parsed: 'rm' },
  { command: 'env -S "rm f"', parsed: 'rm' },
  { command: 'sudo -u root rm f', parsed: 'rm' },
  { command: 'nohup rm f &', parsed: 'rm' },
  { command: 'timeout 5 rm f', parsed: 'rm' },
  { command: 'timeout -s KILL -k 1 5 rm f', parsed: 'rm' },
  { command: 'nice -n 5 rm f', parsed: 'rm' },
  { command: 'exec rm f', parsed: 'rm' },
  { command: 'builtin command rm f', parsed: 'rm' },
  { command: 'command -p rm f', parsed: 'rm' },
  { command: 'stdbuf -o0 rm f', parsed: 'rm' },
  { command: 'setsid rm f', parsed: 'rm' },
  { command: 'busybox rm f', parsed: 'rm' },
  { command: 'coproc rm f', parsed: 'rm' },
  { command: 'flock .lock rm f', parsed: 'rm' },
  { command: 'echo f | xargs -I{} rm {}', parsed: 'rm' },
  { command: 'find . -name f -exec rm {} \\;', parsed: 'rm' },
  { command: 'find . -name f -execdir rm {} +', parsed: 'rm' },
  { command: 'command >/dev/null rm f', parsed: 'rm' },
  // Scripts handed to shells, eval and friends.
  { command: "sh -c 'rm f'", parsed: 'rm' },
  { command: 'bash -c "echo; rm f"', parsed: 'rm' },
  { command: "zsh -ec 'rm f'", parsed: 'rm' },
  { command: "eval 'r''m f'", parsed: 'rm' },
  { command: "watch -n1 'rm f'", parsed: 'rm' },
  { command: "su -c 'rm f'", parsed: 'rm' },
  { command: "script -qc 'rm f' /dev/null", parsed: 'rm' },
  { command: "trap 'rm f' EXIT", parsed: 'rm' },
  { command: "bash <<'EOF'\nrm f\nEOF", parsed: 'rm' },
  { command: "bash <<< 'rm f'", parsed: 'rm' },
  { command: `printf 'f\\0' | xargs -0 sh -c 'rm "$0"'`, parsed: 'rm' },
  { command: "bash /dev/stdin <<< 'rm f'", parsed: 'rm' },
  { command: "mapfile -C 'rm f' -c 1 <<< x", parsed: 'rm' },
  // Structures, substitutions and heredocs.
  { command: 'f() { rm f; }; f', parsed: 'rm' },
  { command: 'case x in x) rm f;; esac', parsed: 'rm' },
  { command: 'while true; do rm f; break; done', parsed: 'rm' },
  { command: '[[ $(rm f) ]]', parsed: 'rm' },
  { command: '(( $(rm f) ))', parsed: 'rm' },
  { command: 'cat <(rm f)', parsed: 'rm' },
  { command: 'echo "`rm f`"', parsed: 'rm' },
  { command: 'x=$(rm f)', parsed: 'rm' },
  { command: 'echo ${x:-$(rm f)}', parsed: 'rm' },
  { command: 'cat <<EOF\n$(rm f)\nEOF', parsed: 'rm' },
  { command: 'cat <<EOF\n`rm f`\nEOF', parsed: 'rm' },
  // Places where tree-sitter-bash reads bash differently (repaired in shell-parser).
  { command: 'ls | sort | uniq\nrm f && true', parsed: 'rm' },
  { command: 'ls | sort | uniq <f\nrm f && true', parsed: 'rm' },
  // Names known only when bash runs: these rows ask only because the gate consumes `dynamic`.
  { command: '$(echo rm) f', parsed: 'dynamic' },
  { command: 'x=rm; "$x" f', parsed: 'dynamic' },
  { command: 'rm${IFS}f', parsed: 'dynamic' },
  { command: 'r* f', parsed: 'dynamic' },
  { command: 'r{m,} f', parsed: 'dynamic' },
  { command: 'echo rm f | sh', parsed: 'dynamic' },
  { command: "echo 'rm f' | bash -s", parsed: 'dynamic' },
  { command: 's="rm f"; bash -c "$s"', parsed: 'dynamic' },
  { command: 's="rm f"; eval "$s"', parsed: 'dynamic' },
  { command: "echo 'rm f' > s.sh; source s.sh", parsed: 'dynamic' },
  { command: 'shopt -s expand_aliases; alias del=rm\ndel f', parsed: 'dynamic' },
  { command: "x='a[$(rm f)]'; echo $((x))", parsed: 'dynamic' },
  { command: "PS4='$(rm f)' bash -xc true", parsed: 'dynamic' },
  { command: 'echo f | xargs sh -c', parsed: 'dynamic' },
  { command: "echo 'rm f' | bash -", parsed: 'dynamic' },
  { command: "bash <(echo 'rm f')", parsed: 'dynamic' },
  { command: 'hash -p /bin/rm ls; ls f', parsed: 'dynamic' },
  { command: 'ln -s "$(which rm)" ls; PATH=.:$PATH ls f', parsed: 'dynamic' },
  { command: `read -r x <<< '$(rm f)'; echo "\${x@P}"`, parsed: 'dynamic' },
  // Text the grammar cannot read: never auto-allowed.
  { command: '{r,}m f', parsed: 'incomplete' },
  { command: '[r]m f', parsed: 'incomplete' },
]

const BENIGN: readonly string[] = [
  'git status && ls',
  'echo "rm is a word"',
  "grep -r 'rm -rf' .",
  'ls | wc -l',
  "echo '$(rm f)'",
  'FOO=1 ls',
  'cd sub && ls',
  "printf '%s\\n' a b | sort",
  'for i in 1 2; do echo "$i"; done',
  "cat <<'EOF'\n$(rm f)\nEOF",
  'test -f f && echo present',
  'find . -name f -print',
  'ls -la 2>&1 | head -n 3',
  'env FOO=1 printenv FOO',
  "bash -c 'echo nested'",
  'echo a | xargs echo',
  'timeout 5 true',
  'command -v ls',
  'echo "$(date +%Y) is not rm"',
]

/** Whether a pattern the rules see matches `rm *`. */
const matchesRm = (patterns: readonly string[]) => patterns.some((p) => wildcardMatch(p, 'rm *'))

describe('hostile shell forms cannot delete a file when `rm *` is denied', () => {
  let tmp: ReturnType<typeof tempDir>
  let data: ReturnType<typeof tempDir>
  let f: Fixture
  beforeEach(() => {
    tmp = tempDir('chronicle-shell-forms-')
    data = tempDir('chronicle-shell-forms-data-')
    writeFileSync(join(tmp.dir, 'f'), 'precious\n')
    writeFileSync(join(tmp.dir, 'notes.txt'), 'never rm -rf /\n')
    mkdirSync(join(tmp.dir, 'sub'))
    f = fixture({ directory: tmp.dir, rules: RULES })
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
    data.cleanup()
  })

  /** Runs the real bash tool through the real gate; an ask is refused (the call aborted) as soon as it is raised. */
  async function attempt(command: string): Promise<{ outcome: 'denied' | 'asked' | 'ran'; exitCode?: unknown }> {
    const abort = new AbortController()
    const stop = f.store.onCommit((events) => {
      if (events.some((e) => e.type === 'permission.requested')) abort.abort()
    })
    try {
      const result = await createBashTool({ dataDir: data.dir }).execute(
        { command, timeout: 10_000 },
        f.ctx({ abort: abort.signal }),
      )
      return { outcome: 'ran', exitCode: result.metadata?.['exitCode'] }
    } catch (err) {
      if (err instanceof ToolFailure && err.kind === 'denied') return { outcome: 'denied' }
      if (err instanceof ToolFailure && err.kind === 'aborted' && f.requested().length > 0) return { outcome: 'asked' }
      throw err
    } finally {
      stop()
    }
  }

  it('has at least 45 hostile rows and 10 benign ones', () => {
    expect(HOSTILE.length).toBeGreaterThanOrEqual(45)
    expect(BENIGN.length).toBeGreaterThanOrEqual(10)
  })

  it.each(HOSTILE)('$command is $parsed, and never runs', async ({ command, parsed }) => {
    const expanded = expandPatterns({ permission: 'bash', patterns: [command] })
    if (parsed === 'rm') expect(matchesRm(expanded.patterns), expanded.patterns.join(' | ')).toBe(true)
    if (parsed === 'dynamic') expect(expanded).toMatchObject({ complete: true, dynamic: true })
    if (parsed === 'incomplete') expect(expanded.complete).toBe(false)

    const { outcome } = await attempt(command)
    expect(outcome).toBe(parsed === 'rm' ? 'denied' : 'asked')
    if (outcome === 'asked') expect(f.requested().map((r) => r.permission)).toEqual(['bash'])
    expect(existsSync(join(tmp.dir, 'f'))).toBe(true)
  })

  describe('benign commands stay allowed and run', () => {
    beforeEach(() => {
      execFileSync('git', ['init', '-q'], { cwd: tmp.dir })
    })

    it.each(BENIGN)('%s', async (command) => {
      const expanded = expandPatterns({ permission: 'bash', patterns: [command] })
      expect(expanded).toMatchObject({ complete: true, dynamic: false })
      expect(matchesRm(expanded.patterns)).toBe(false)

      expect(await attempt(command)).toEqual({ outcome: 'ran', exitCode: 0 })
      expect(f.requested()).toEqual([])
      expect(existsSync(join(tmp.dir, 'f'))).toBe(true)
    })
  })
})
