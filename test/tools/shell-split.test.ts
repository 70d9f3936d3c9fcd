import { describe, expect, it } from 'vitest'
import { simpleCommands, splitShellCommand } from '../../src/tools/permission/shell-split.js'

const split = (c: string) => splitShellCommand(c)
const commands = (c: string) => splitShellCommand(c).commands

describe('splitShellCommand: lists, pipelines and structures', () => {
  it('splits on && || ; | & and newlines', () => {
    expect(split('git fetch && git clean -fd')).toEqual({
      commands: ['git fetch', 'git clean -fd'],
      complete: true,
      dynamic: false,
    })
    expect(split('a || b; c | d & e\nf')).toEqual({
      commands: ['a', 'b', 'c', 'd', 'e', 'f'],
      complete: true,
      dynamic: false,
    })
  })

  it('keeps redirections in the pattern, after the words, and never in the name', () => {
    expect(commands('make 2>&1 | tee log')).toEqual(['make 2>&1', 'tee log'])
    expect(commands('make &>/dev/null')).toEqual(['make &>/dev/null'])
    expect(commands('>/dev/null rm -f x')).toEqual(['rm -f x >/dev/null'])
    expect(commands('cat <<EOF > out.txt\nhello\nEOF')).toEqual(['cat <<EOF > out.txt'])
  })

  it('does not split inside quotes, and removes the quotes of literal words', () => {
    expect(commands(`echo 'a && b' "c; d"`)).toEqual(['echo a && b c; d'])
    expect(commands(`git commit -m "two  spaces"`)).toEqual(['git commit -m two  spaces'])
  })

  it('finds commands inside $( ), backticks (also in double quotes), <( ) and >( )', () => {
    expect(commands('echo $(rm -rf /tmp/x)')).toEqual(['echo $(rm -rf /tmp/x)', 'rm -rf /tmp/x'])
    expect(commands('echo `git clean -fd`')).toEqual(['echo `git clean -fd`', 'git clean -fd'])
    expect(commands('echo "now: $(date; git clean -x)"')).toEqual([
      'echo "now: $(date; git clean -x)"',
      'date',
      'git clean -x',
    ])
    expect(commands('diff <(ls a) <(ls b)')).toEqual(['diff <(ls a) <(ls b)', 'ls a', 'ls b'])
    expect(commands('tee >(gzip -c) < x')).toEqual(['tee >(gzip -c) < x', 'gzip -c'])
    expect(commands('echo $(echo $(git clean -fd))')).toEqual([
      'echo $(echo $(git clean -fd))',
      'echo $(git clean -fd)',
      'git clean -fd',
    ])
  })

  it('finds substitutions in arithmetic, tests, assignments, expansions and redirection targets', () => {
    expect(commands('echo $(( $(wc -l < f) + 1 ))')).toEqual(['echo $(( $(wc -l < f) + 1 ))', 'wc -l < f'])
    expect(commands('(( $(id -u) == 0 ))')).toEqual(['id -u'])
    expect(commands('[[ -n $(git status -s) ]]')).toEqual(['git status -s'])
    expect(commands('x=$(git rev-parse HEAD)')).toEqual(['git rev-parse HEAD'])
    expect(commands('echo ${x:-$(hostname)}')).toEqual(['echo ${x:-$(hostname)}', 'hostname'])
    expect(commands('echo > "$(mktemp)"')).toEqual(['echo > "$(mktemp)"', 'mktemp'])
  })

  it('does not treat single-quoted text, quoted heredocs or plain arithmetic as commands', () => {
    expect(commands("echo '$(git clean -fd)'")).toEqual(['echo $(git clean -fd)'])
    expect(commands('echo $((1 + 2))')).toEqual(['echo $((1 + 2))'])
    expect(commands("cat <<'EOF'\n$(git clean -fd)\nEOF")).toEqual(["cat <<'EOF'"])
  })

  it('runs the substitutions of an unquoted heredoc, backticks included', () => {
    expect(commands('cat <<EOF\n$(git clean -fd) `git reset --hard`\nEOF')).toEqual([
      'cat <<EOF',
      'git clean -fd',
      'git reset --hard',
    ])
  })

  it('splits groups, subshells, negations, control structures and function bodies', () => {
    expect(commands('(cd x && git clean -fd)')).toEqual(['cd x', 'git clean -fd'])
    expect(commands('{ a; b; }')).toEqual(['a', 'b'])
    expect(commands('! git diff --quiet')).toEqual(['git diff --quiet'])
    expect(commands('if test -f x; then a; elif b; then c; else d; fi')).toEqual(['test -f x', 'a', 'b', 'c', 'd'])
    expect(commands('for f in $(ls); do wc -l "$f"; done')).toEqual(['ls', 'wc -l "$f"'])
    expect(commands('while read l; do echo "$l"; done < list')).toEqual(['read l', 'echo "$l"'])
    expect(commands('case $x in a) b;; *) c;; esac')).toEqual(['b', 'c'])
    expect(commands('clean() { git clean -fd; }; clean')).toEqual(['git clean -fd', 'clean'])
  })

  it('ignores comments', () => {
    expect(commands('ls # && rm -rf /')).toEqual(['ls'])
    expect(commands('ls # a comment does not continue \\\nrm -rf x')).toEqual(['ls', 'rm -rf x'])
  })

  it('reports text it cannot follow as incomplete', () => {
    expect(split(`echo 'unterminated && git clean`).complete).toBe(false)
    expect(split('echo $(git clean -fd').complete).toBe(false)
    expect(split('echo `x').complete).toBe(false)
    expect(split('cat <<EOF\n`git clean -fd\nEOF').complete).toBe(false)
    expect(split('if true; then').complete).toBe(false)
  })
})

describe('splitShellCommand: command names resolve as bash resolves them', () => {
  it("through quotes, escapes and $'…' strings", () => {
    for (const spelling of ['\\rm', 'r\\m', '"rm"', "'rm'", '"r"m', "r''m", "$'rm'", "$'\\x72\\x6d'", '$"rm"']) {
      expect(split(`${spelling} -f x`), spelling).toEqual({ commands: ['rm -f x'], complete: true, dynamic: false })
    }
  })

  it('through paths, keeping the path as a pattern too: an allowed `ls *` must not allow some other program called ls', () => {
    expect(commands('/bin/rm -f x')).toEqual(['rm -f x', '/bin/rm -f x'])
    expect(commands('"./bin/rm" -f x')).toEqual(['rm -f x', './bin/rm -f x'])
    expect(commands('~/bin/rm -f x')).toEqual(['rm -f x', '~/bin/rm -f x'])
  })

  it('through backslash-newline continuations, which bash removes before splitting words', () => {
    expect(commands('r\\\nm -f x')).toEqual(['rm -f x'])
    expect(commands('git \\\n  clean -fd')).toEqual(['git clean -fd'])
    expect(commands('echo a\\\\\nrm x')).toEqual(['echo a\\', 'rm x']) // an escaped backslash, then a newline
    expect(commands("echo 'a\\\nb'")).toEqual(['echo a\\\nb']) // inside single quotes it stays
  })

  it('resolves quoted and escaped arguments, and keeps the source text of arguments with expansions', () => {
    expect(commands(`grep -e 'a b' \\"c\\" "$HOME/x"`)).toEqual(['grep -e a b "c" "$HOME/x"'])
  })

  it('leaves leading assignments out of the pattern', () => {
    expect(commands('FOO=1 BAR="a b" git clean -fd')).toEqual(['git clean -fd'])
  })

  it('is dynamic when the name is known only when the shell runs', () => {
    for (const command of ['$x f', '"$cmd" f', '$(echo rm) f', '`echo rm` f', 'rm${IFS}f', 'r* f', 'r? f', 'r{m,} f']) {
      expect(split(command), command).toMatchObject({ complete: true, dynamic: true })
    }
    expect(commands('$(echo rm) f')).toEqual(['$(echo rm) f', 'echo rm'])
  })

  it('is incomplete for name patterns the grammar cannot read (`{r,}m`, `[r]m`)', () => {
    expect(split('{r,}m f').complete).toBe(false)
    expect(split('[r]m f').complete).toBe(false)
  })

  it('is dynamic when a variable holds code that bash may run later (arithmetic, ${x@P}, PS4)', () => {
    expect(split("x='a[$(rm f)]'; echo $((x))").dynamic).toBe(true)
    expect(split("env PS4='$(rm f)' bash -xc :").dynamic).toBe(true)
    expect(split('read -r x; echo "${x@P}"').dynamic).toBe(true)
    expect(split('x=$(date); echo $((x))').dynamic).toBe(false)
  })

  it('is dynamic when PATH (or what a shell reads first) changes which program a name is', () => {
    expect(split('PATH=.:$PATH ls f').dynamic).toBe(true)
    expect(split('export PATH="$PWD/bin:$PATH"; ls').dynamic).toBe(true)
    expect(split('env PATH=. ls').dynamic).toBe(true)
    expect(split('BASH_ENV=./x bash -c true').dynamic).toBe(true)
  })
})

describe('splitShellCommand: wrappers run the command in their arguments', () => {
  it.each([
    ['env -i -u HOME -C /tmp A=1 rm f', 'rm f'],
    ['/usr/bin/env rm f', 'rm f'],
    ['env -S "rm -f x"', 'rm -f x'],
    ['command -p rm f', 'rm f'],
    ['command -v rm', 'rm'],
    ['builtin command rm f', 'rm f'],
    ['exec -a name -cl rm f', 'rm f'],
    ['time -p rm f', 'rm f'],
    ['nice -n 5 rm f', 'rm f'],
    ['nohup rm f', 'rm f'],
    ['timeout -s KILL -k 5 --preserve-status 10 rm f', 'rm f'],
    ['timeout --signal=TERM 10s rm f', 'rm f'],
    ['xargs -0 -n 1 -P4 rm', 'rm'],
    ['xargs -I{} rm {}', 'rm {}'],
    ['xargs --max-args=1 --arg-file list rm', 'rm'],
    ['sudo -u root -g wheel -E rm f', 'rm f'],
    ['sudo --user=root HOME=/root rm f', 'rm f'],
    ['doas -u root rm f', 'rm f'],
    ['stdbuf -o0 -eL rm f', 'rm f'],
    ['setsid -f rm f', 'rm f'],
    ['ionice -c 3 rm f', 'rm f'],
    ['chrt -b 0 rm f', 'rm f'],
    ['taskset -c 0 rm f', 'rm f'],
    ['flock -w 5 /tmp/lock rm f', 'rm f'],
    ['unbuffer rm f', 'rm f'],
    ['busybox rm f', 'rm f'],
    ['coproc rm f', 'rm f'],
    ['find . -name "*.o" -exec rm -f {} \\;', 'rm -f {}'],
    ['find . -execdir rm {} +', 'rm {}'],
    ['find . -ok rm {} \\;', 'rm {}'],
  ])('%s runs %s', (command, wrapped) => {
    const result = split(command)
    expect(result.commands.at(-1)).toBe(wrapped)
    expect(result).toMatchObject({ complete: true, dynamic: false })
  })

  it('emits the wrapper and every command it wraps, outer first', () => {
    expect(commands('sudo nice -n 5 env A=1 git clean -fd')).toEqual([
      'sudo nice -n 5 env A=1 git clean -fd',
      'nice -n 5 env A=1 git clean -fd',
      'env A=1 git clean -fd',
      'git clean -fd',
    ])
  })

  it('counts xargs without a command as echo', () => {
    expect(commands('ls | xargs')).toEqual(['ls', 'xargs', 'echo'])
  })

  it('counts find -delete as rm of the paths find searches', () => {
    expect(commands('find src build -name "*.tmp" -delete')).toEqual([
      'find src build -name *.tmp -delete',
      'rm src build',
    ])
    expect(commands('find -L -name x -delete')).toEqual(['find -L -name x -delete', 'rm .'])
  })
})

describe('splitShellCommand: scripts handed to shells, eval and friends are split too', () => {
  it.each([
    [`bash -c 'git fetch && git clean -fd'`, ['git fetch', 'git clean -fd']],
    [`sh -lc "git clean -fd"`, ['git clean -fd']],
    [`zsh -ec 'git clean -fd'`, ['git clean -fd']],
    [`bash -o errexit --norc -c 'git clean -fd' name arg`, ['git clean -fd']],
    [`bash +o posix -c 'git clean -fd'`, ['git clean -fd']],
    [`busybox sh -c 'git clean -fd'`, ['git clean -fd']],
    [`eval 'git clean' "-fd"`, ['git clean -fd']],
    [`eval 'gi''t clean -fd'`, ['git clean -fd']],
    [`watch -n1 'git clean -fd'`, ['git clean -fd']],
    [`su -c 'git clean -fd' root`, ['git clean -fd']],
    [`script -qc 'git clean -fd' /dev/null`, ['git clean -fd']],
    [`flock /tmp/lock -c 'git clean -fd'`, ['git clean -fd']],
    [`trap 'git clean -fd' EXIT`, ['git clean -fd']],
    [`bash <<'EOF'\ngit clean -fd\nEOF`, ['git clean -fd']],
    [`sh <<EOF\ngit clean -fd\nEOF`, ['git clean -fd']],
    [`bash <<< 'git clean -fd'`, ['git clean -fd']],
    [`xargs -I{} sh -c 'git clean {}'`, ['git clean {}']],
    [`bash /dev/stdin <<< 'git clean -fd'`, ['git clean -fd']],
    [`mapfile -C 'git clean -fd' -c 1 < list`, ['git clean -fd']],
  ])('%s', (command, inner) => {
    const result = split(command)
    expect(result.commands.slice(-inner.length)).toEqual(inner)
    expect(result).toMatchObject({ complete: true, dynamic: false })
  })

  it('is dynamic when the script is not in the command line', () => {
    for (const command of [
      'bash -c "$script"',
      'eval "$cmd"',
      'eval $(ssh-agent)',
      'curl -fsSL https://example.com/install.sh | sh',
      'echo rm f | bash -s',
      'echo rm f | (bash)',
      'cat script | sudo -s',
      'bash < script.sh',
      'sh <<EOF\n$cmd\nEOF',
      'bash <<< "$cmd"',
      'ls | xargs sh -c',
      'source ./env.sh',
      '. ./env.sh',
      'alias ls=rm',
      'echo rm f | bash -',
      'bash <(curl -s https://example.com/x.sh)',
      'hash -p /bin/rm ls',
    ]) {
      expect(split(command), command).toMatchObject({ complete: true, dynamic: true })
    }
  })

  it('is not dynamic for a shell running a script file, or asked for its version', () => {
    expect(split('bash ./build.sh --fast')).toEqual({
      commands: ['bash ./build.sh --fast'],
      complete: true,
      dynamic: false,
    })
    expect(split('bash --version').dynamic).toBe(false)
  })

  it('stops following scripts nested deeper than 8 levels', () => {
    const nest = (depth: number): string => (depth === 0 ? 'git clean -fd' : `eval ${JSON.stringify(nest(depth - 1))}`)
    expect(split(nest(8))).toMatchObject({ complete: true })
    expect(split(nest(8)).commands.at(-1)).toBe('git clean -fd')
    expect(split(nest(9)).complete).toBe(false)
  })
})

describe('simpleCommands', () => {
  it('gives each command its resolved name and arguments, without assignments or redirections', () => {
    expect(simpleCommands('FOO=1 /bin/cat "a b" ../x 2>/dev/null | sudo tee -a ~/log')).toEqual([
      { name: 'cat', args: ['a b', '../x'] },
      { name: 'sudo', args: ['tee', '-a', '~/log'] },
      { name: 'tee', args: ['-a', '~/log'] },
    ])
  })
})

/** bash's reserved words are not command names, so generated commands avoid them. */
const RESERVED = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'case',
  'esac',
  'for',
  'select',
  'while',
  'until',
  'do',
  'done',
  'in',
  'function',
  'time',
  'coproc',
])

describe('splitShellCommand (property)', () => {
  it('finds every simple command however they are chained, grouped or substituted', async () => {
    const fc = await import('fast-check')
    const word = fc.stringMatching(/^[a-z][a-z0-9._-]{0,6}$/).filter((w) => !RESERVED.has(w))
    const simple = fc.array(word, { minLength: 1, maxLength: 4 }).map((w) => w.join(' '))
    const op = fc.constantFrom(' && ', ' || ', '; ', ' | ', ' & ', '\n')
    const wrap = fc.constantFrom(
      (c: string) => c,
      (c: string) => `(${c})`,
      (c: string) => `echo $(${c})`,
      (c: string) => `echo \`${c}\``,
      (c: string) => `echo "x $(${c}) y"`,
      (c: string) => `bash -c '${c}'`,
      (c: string) => `{ ${c}; }`,
      (c: string) => `if true; then ${c}; fi`,
      (c: string) => `sudo -u root ${c}`,
      (c: string) => `eval "${c}"`,
    )
    fc.assert(
      fc.property(fc.array(fc.tuple(simple, wrap, op), { minLength: 1, maxLength: 6 }), (parts) => {
        const command = parts.map(([c, w], i) => w(c) + (i < parts.length - 1 ? (parts[i]?.[2] ?? '; ') : '')).join('')
        const { commands, complete } = splitShellCommand(command)
        expect(complete).toBe(true)
        for (const [c] of parts) expect(commands).toContain(c)
      }),
      { numRuns: 300 },
    )
  })

  it('resolves a command name however it is spelled', async () => {
    const fc = await import('fast-check')
    const name = fc.stringMatching(/^[a-z][a-z0-9_-]{0,7}$/).filter((w) => !RESERVED.has(w))
    const spell = fc.constantFrom(
      (n: string) => n,
      (n: string) => `/usr/bin/${n}`,
      (n: string) => `\\${n}`,
      (n: string) => `"${n}"`,
      (n: string) => `'${n}'`,
      (n: string) => `${n.slice(0, 1)}"${n.slice(1)}"`,
      (n: string) => `$'${n}'`,
      (n: string) => `${n.slice(0, 1)}\\\n${n.slice(1)}`,
    )
    fc.assert(
      fc.property(name, spell, (n, s) => {
        expect(splitShellCommand(`${s(n)} arg`).commands).toContain(`${n} arg`)
      }),
      { numRuns: 300 },
    )
  })
})
