import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readFileSync } from 'node:fs'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createDiagnostics, type DiagnosticsService } from '../../../src/tools/lsp/diagnostics.js'
import { builtinServerPaths, builtinServers, type LspServerSpec } from '../../../src/tools/lsp/servers.js'
import { detectSandbox, unconfined } from '../../../src/tools/sandbox.js'
import { writeLease } from '../../../src/tools/lease-watchdog.js'

/**
 * Diagnostics from a real language server (typescript-language-server, installed as a dev dependency),
 * and servers that crash or hang: the call never waits past its deadline.
 */

let service: DiagnosticsService | undefined
let dir: string | undefined
afterEach(() => {
  service?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

function project(): string {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-lsp-')))
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true } }))
  writeFileSync(join(dir, 'math.ts'), 'export function add(a: number, b: number): number {\n  return a + b\n}\n')
  return dir
}

const sandbox = unconfined('off')

describe('language-server diagnostics', () => {
  it('reports the type error an edit introduced, and none once it is fixed (the server reused)', async () => {
    const directory = project()
    service = createDiagnostics({ servers: builtinServers(), sandbox, deadlineMs: 30_000 })
    const file = join(directory, 'main.ts')
    writeFileSync(file, "import { add } from './math'\nconst total: number = add(1, '2')\nexport { total }\n")
    const broken = await service.after(directory, [file])
    expect(broken.notReady).toEqual([])
    expect(broken.files).toEqual([
      {
        path: file,
        errors: [
          {
            line: 2,
            character: 30,
            message: "Argument of type 'string' is not assignable to parameter of type 'number'.",
            source: 'typescript',
            code: 2345,
          },
        ],
      },
    ])
    writeFileSync(file, "import { add } from './math'\nconst total: number = add(1, 2)\nexport { total }\n")
    expect(await service.after(directory, [file])).toEqual({ files: [{ path: file, errors: [] }], notReady: [] })
  }, 60_000)

  /**
   * A fake server: a node script that counts its starts, then crashes, hangs, answers initialize but never
   * reports (nor answers a request for diagnostics), or answers every request with something that is not
   * diagnostics. As a `tsserver` server its diagnostics are asked for; as a `push` one, awaited.
   */
  function fake(
    kind: 'crash' | 'hang' | 'silent' | 'garbage' | 'recording',
    diagnostics: 'push' | 'tsserver' = 'push',
  ): { spec: LspServerSpec; starts: () => number; received: () => Record<string, unknown>[] } {
    const directory = dir ?? project()
    const script = join(directory, `${kind}-server.mjs`)
    const count = join(directory, `${kind}.starts`)
    const log = join(directory, `${kind}.log`)
    const body = {
      crash: 'process.exit(3)',
      hang: 'process.stdin.resume()',
      // answers initialize (id 1), then reads and never publishes
      silent:
        "process.stdin.once('data', () => { const b = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { capabilities: {} } }); process.stdout.write(`Content-Length: ${Buffer.byteLength(b)}\\r\\n\\r\\n${b}`) }); process.stdin.resume()",
      // every request (by its id in the stream) answered with a body that is not a list of diagnostics
      garbage:
        "process.stdin.on('data', (d) => { for (const [, id] of String(d).matchAll(/\"id\":(\\d+)/g)) { const b = JSON.stringify({ jsonrpc: '2.0', id: Number(id), result: { capabilities: {}, body: 'not a list' } }); process.stdout.write(`Content-Length: ${Buffer.byteLength(b)}\\r\\n\\r\\n${b}`) } })",
      // what it is sent, written down; every request answered with no diagnostics
      recording: `process.stdin.on('data', (d) => { appendFileSync(${JSON.stringify(log)}, d); for (const [, id] of String(d).matchAll(/"id":(\\d+)/g)) { const b = JSON.stringify({ jsonrpc: '2.0', id: Number(id), result: { capabilities: {}, body: [] } }); process.stdout.write(\`Content-Length: \${Buffer.byteLength(b)}\\r\\n\\r\\n\${b}\`) } })`,
    }[kind]
    writeFileSync(
      script,
      `import { appendFileSync } from 'node:fs'\nappendFileSync(${JSON.stringify(count)}, 'x')\n${body}\n`,
    )
    return {
      spec: {
        name: kind,
        extensions: ['.ts'],
        command: [process.execPath, script],
        diagnostics,
        languageId: () => 'typescript',
      },
      starts: () => {
        try {
          return readFileSync(count, 'utf8').length
        } catch {
          return 0
        }
      },
      received: () =>
        readFileSync(log, 'utf8')
          .split(/Content-Length: \d+\r\n\r\n/)
          .filter(Boolean)
          .map((body) => JSON.parse(body) as Record<string, unknown>),
    }
  }

  it.each([
    ['crash', 'push'],
    ['hang', 'push'],
    ['silent', 'push'],
    ['crash', 'tsserver'],
    ['hang', 'tsserver'],
    ['silent', 'tsserver'],
    ['garbage', 'tsserver'],
  ] as const)(
    'a server that would %s (diagnostics %s) does not hold the edit past the deadline; it is started again next time',
    async (kind, diagnostics) => {
      const directory = project()
      const server = fake(kind, diagnostics)
      service = createDiagnostics({ servers: [server.spec], sandbox, deadlineMs: 300 })
      const file = join(directory, 'math.ts')
      for (let round = 1; round <= 2; round++) {
        const started = performance.now()
        expect(await service.after(directory, [file])).toEqual({ files: [], notReady: [file] })
        expect(performance.now() - started).toBeLessThan(300 + 1500) // the deadline, and the machine's load
        // on a loaded machine node may take longer than the deadline to start: the next edit comes once it has died
        if (kind === 'crash') {
          await vi.waitFor(() => expect(server.starts()).toBe(round), { timeout: 10_000 })
          await new Promise((r) => setTimeout(r, 200))
        }
      }
      // a dead server is started again at the next edit; a live one (hung or silent) is reused
      await new Promise((r) => setTimeout(r, 200))
      expect(server.starts()).toBe(kind === 'crash' ? 2 : 1)
    },
  )

  it("tsserver is told not to watch the server's own install, but never a directory that holds the workspace or lies in it", async () => {
    const directory = project()
    const server = fake('recording', 'tsserver')
    const own = join(tmpdir(), 'chronicle-lsp-install', 'node_modules')
    const unwatched = [own, join(directory, 'node_modules'), join(directory, '..'), join(tmpdir(), '*', 'node_modules')]
    service = createDiagnostics({ servers: [{ ...server.spec, unwatched }], sandbox, deadlineMs: 10_000 })
    const file = join(directory, 'math.ts')
    expect(await service.after(directory, [file])).toEqual({ files: [{ path: file, errors: [] }], notReady: [] })
    expect(server.received().map((m) => m.method)).toEqual([
      'initialize',
      'initialized',
      'workspace/executeCommand', // the configure, before the file opens its project
      'textDocument/didOpen',
      'workspace/executeCommand',
      'workspace/executeCommand',
    ])
    expect(server.received()[2]?.params).toEqual({
      command: 'typescript.tsserverRequest',
      arguments: ['configure', { watchOptions: { excludeDirectories: [own] } }],
    })
  })

  it('a read file loads its project ahead of the edit, and is closed again until the edit opens it', async () => {
    const directory = project()
    const server = fake('recording', 'tsserver')
    service = createDiagnostics({ servers: [server.spec], sandbox, deadlineMs: 10_000 })
    const file = join(directory, 'math.ts')
    service.warm(directory, file)
    const methods = () => server.received().map((m) => m.method)
    await vi.waitFor(() => expect(methods()).toContain('textDocument/didClose'))
    expect(await service.after(directory, [file])).toEqual({ files: [{ path: file, errors: [] }], notReady: [] })
    expect(methods()).toEqual([
      'initialize',
      'initialized',
      'textDocument/didOpen', // the read: the project loads
      'workspace/executeCommand', // answered once it has
      'textDocument/didClose', // tsserver reads it from disk until the edit
      'textDocument/didOpen', // the edit
      'workspace/executeCommand',
      'workspace/executeCommand',
    ])
  })

  it('a read outside the session directory, in node_modules, or of a file no server takes starts nothing', async () => {
    const directory = project()
    const server = fake('recording', 'tsserver')
    service = createDiagnostics({ servers: [server.spec], sandbox, deadlineMs: 10_000 })
    mkdirSync(join(directory, 'node_modules', 'left-pad'), { recursive: true })
    for (const file of [join(directory, 'node_modules', 'left-pad', 'index.d.ts'), join(tmpdir(), 'elsewhere.ts')])
      service.warm(directory, file)
    service.warm(directory, join(directory, 'notes.md'))
    await new Promise((r) => setTimeout(r, 200))
    expect(server.starts()).toBe(0)
  })

  it('the server runs in the sandbox bash uses (bubblewrap here) and reports there too', async () => {
    const directory = project()
    const confined = await detectSandbox('auto', { expose: builtinServerPaths() }) // as src/main.ts does
    service = createDiagnostics({ servers: builtinServers(), sandbox: confined, deadlineMs: 30_000 })
    const file = join(directory, 'main.ts')
    writeFileSync(file, "export const total: number = '2'\n")
    const report = await service.after(directory, [file])
    expect(report.files[0]?.errors.map((e) => e.code)).toEqual([2322])
  }, 60_000)

  it('a file no server takes is not reported', async () => {
    const directory = project()
    service = createDiagnostics({ servers: builtinServers(), sandbox })
    writeFileSync(join(directory, 'notes.md'), '# notes')
    expect(await service.after(directory, [join(directory, 'notes.md')])).toEqual({ files: [], notReady: [] })
  })

  it("a workspace's files cannot choose what runs: its own tsserver, server binary and tsserver plugins stay unrun", async () => {
    const directory = project()
    const marker = join(directory, 'PWNED')
    const evil = `require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran')\n`
    for (const [path, content] of [
      ['node_modules/typescript/package.json', '{"name":"typescript","version":"99.0.0","main":"lib/typescript.js"}'],
      ['node_modules/typescript/lib/tsserver.js', evil],
      ['node_modules/typescript/lib/typescript.js', evil],
      ['node_modules/.bin/typescript-language-server', `#!/usr/bin/env node\n${evil}`],
      ['node_modules/evil-plugin/package.json', '{"name":"evil-plugin","main":"index.js"}'],
      [
        'node_modules/evil-plugin/index.js',
        `${evil}module.exports = () => ({ create: (info) => info.languageService })\n`,
      ],
    ] as const) {
      mkdirSync(join(directory, path, '..'), { recursive: true })
      writeFileSync(join(directory, path), content)
    }
    writeFileSync(
      join(directory, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true, plugins: [{ name: 'evil-plugin' }] } }),
    )
    service = createDiagnostics({ servers: builtinServers(), sandbox, deadlineMs: 30_000 })
    const file = join(directory, 'main.ts')
    writeFileSync(file, "import { add } from './math'\nexport const total: number = add(1, '2')\n")
    const report = await service.after(directory, [file])
    expect(report.files[0]?.errors.map((e) => e.code)).toEqual([2345]) // Chronicle's own TypeScript answered
    expect(existsSync(marker)).toBe(false)
  }, 60_000)

  it("on a cluster node, a language server is killed once the node's lease is over (the node frozen or dead)", async () => {
    const directory = project()
    const pidFile = join(directory, 'server.pid')
    const script = join(directory, 'pid-server.mjs')
    // a server that says who it is and then hangs, as a wedged one would
    writeFileSync(
      script,
      `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(pidFile)}, String(process.pid))\nprocess.stdin.resume()\n`,
    )
    const spec: LspServerSpec = {
      name: 'pid',
      extensions: ['.ts'],
      command: [process.execPath, script],
      diagnostics: 'push',
      languageId: () => 'typescript',
    }
    const leaseFile = join(directory, 'cluster-lease')
    writeLease(leaseFile, Date.now() + 60_000)
    service = createDiagnostics({ servers: [spec], sandbox, deadlineMs: 300, leaseFile })
    service.warm(directory, join(directory, 'math.ts'))
    await vi.waitFor(() => expect(existsSync(pidFile)).toBe(true), { timeout: 10_000 })
    const pid = Number(readFileSync(pidFile, 'utf8'))
    await new Promise((r) => setTimeout(r, 500))
    expect(running(pid)).toBe(true) // the lease runs: the watchdog leaves it alone
    writeLease(leaseFile, Date.now() + 300) // no heartbeat renews it
    await vi.waitFor(() => expect(running(pid)).toBe(false), { timeout: 3_000, interval: 20 })
  })
})

/** Whether `pid` runs (a killed process's zombie, not reaped yet, does not count). */
function running(pid: number): boolean {
  try {
    // pid (comm) state …: comm may hold spaces, so read after its closing parenthesis
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[0] !== 'Z'
  } catch {
    return false
  }
}
