import { execFile, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

/**
 * The package as a user gets it: `npm pack` (which runs `prepare`, so dist/ is
 * built from src/ as it is now, never a stale one), the tarball installed into
 * a fresh prefix from the registry, and the installed `chronicle` run from
 * another directory — no tsx, no src/, no repository around it.
 *
 * A real install: every runtime dependency comes from the registry (or the npm
 * cache), and better-sqlite3 is compiled when its prebuilt binary cannot be
 * downloaded (about a minute on the 2-core VM, which cannot reach GitHub), so
 * the install gets minutes, not seconds.
 */
const INSTALL_MS = 600_000
const SLOW = 90_000

const root = fileURLToPath(new URL('../..', import.meta.url))
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string }
const work = mkdtempSync(join(tmpdir(), 'chronicle-pack-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

/** PATH with this node first: the installed bin is `#!/usr/bin/env node`. */
const PATH = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter)

/**
 * This environment as a shell has it: without the npm_* variables `npm test`
 * sets for its script (npm_config_local_prefix, npm_config_allow_scripts, …),
 * which the npm run here would take as its own configuration.
 */
const shellEnv = {
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name))),
  PATH,
}

function sh(file: string, args: string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env: shellEnv, maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    )
  })
}

/** Every file under dir, relative to it. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
}

describe('the packed tarball, installed', () => {
  const prefix = join(work, 'prefix')
  const installed = join(prefix, 'node_modules', pkg.name)
  const chronicle = join(prefix, 'node_modules', '.bin', 'chronicle')
  const elsewhere = join(work, 'elsewhere')

  beforeAll(async () => {
    const packDir = join(work, 'pack')
    mkdirSync(packDir)
    const packed = await sh('npm', ['pack', '--pack-destination', packDir], root)
    expect(packed, 'npm pack').toMatchObject({ code: 0 })
    const tarball = join(packDir, `${pkg.name}-${pkg.version}.tgz`)

    // A project of its own, so npm lets better-sqlite3's install script fetch or build its binary
    mkdirSync(prefix)
    writeFileSync(
      join(prefix, 'package.json'),
      JSON.stringify({ private: true, allowScripts: { 'better-sqlite3': true } }),
    )
    const install = await sh(
      'npm',
      ['install', '--prefix', prefix, tarball, '--prefer-offline', '--no-audit', '--no-fund'],
      work,
    )
    expect(install, 'npm install <tarball>').toMatchObject({ code: 0 })
    mkdirSync(elsewhere)
  }, INSTALL_MS)

  it('holds the built CLI, every file src/ reads at run time, and no sources or tests', () => {
    expect(
      readdirSync(installed)
        .filter((name) => name !== 'node_modules')
        .sort(),
    ).toEqual(['README.md', 'bin', 'dist', 'docs', 'package.json'])
    const dist = filesUnder(join(installed, 'dist'))
    expect(dist).toContain('cli.js')
    expect(dist.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([])
    // grep-worker.cjs and any other non-TypeScript file, beside the module that loads it (the page's
    // sources are bundled instead: dist/web holds its index.html and assets)
    const assets = filesUnder(join(root, 'src')).filter((f) => !/\.tsx?$/.test(f) && !f.startsWith('web/'))
    expect(assets.length).toBeGreaterThan(0)
    expect(assets.filter((f) => !dist.includes(f))).toEqual([])
    expect(dist).toContain('web/index.html')
    expect(dist.filter((f) => f.startsWith('web/') && !/^web\/(index\.html|assets\/)/.test(f))).toEqual([])
  })

  it('chronicle --version answers from another directory', async () => {
    expect(await sh(chronicle, ['--version'], elsewhere)).toMatchObject({
      code: 0,
      stdout: `chronicle ${pkg.version}\n`,
    })
  })

  it(
    'chronicle serve starts, answers /health and exits 0 on SIGTERM',
    async () => {
      const home = join(work, 'home')
      const data = join(work, 'data')
      const server = spawn(chronicle, ['serve', '--port', '0'], {
        cwd: elsewhere,
        env: { PATH, HOME: home, CHRONICLE_DATA_DIR: data, CHRONICLE_LOG_LEVEL: 'warn' },
      })
      let stdout = ''
      let stderr = ''
      server.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
      server.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
      const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)))
      try {
        const url = await new Promise<string>((resolve, reject) => {
          const check = () => {
            const m = stdout.match(/listening on (http:\/\/\S+)/)
            if (m?.[1]) resolve(m[1])
          }
          server.stdout.on('data', check)
          void exited.then((code) => reject(new Error(`exited ${code} before listening: ${stdout}\n${stderr}`)))
        })
        const health = await fetch(`${url}/health`)
        expect(health.status).toBe(200)
        // the SDK, as a program that installed the package imports it
        const token = readFileSync(join(data, 'token'), 'utf8').trim()
        const program = `import { ChronicleHttp } from 'chronicle/client'
const http = new ChronicleHttp({ url: ${JSON.stringify(url)}, token: ${JSON.stringify(token)} })
const me = await http.call('whoami', {})
const { session } = await http.call('session.create', { directory: ${JSON.stringify(elsewhere)} })
console.log(me.role, session.id.slice(0, 4))`
        expect(await sh(process.execPath, ['--input-type=module', '-e', program], prefix)).toMatchObject({
          code: 0,
          stdout: 'admin ses_\n',
        })
      } finally {
        server.kill('SIGTERM')
      }
      expect(await exited).toBe(0)
    },
    SLOW,
  )
})

describe('bin/chronicle.mjs before a build', () => {
  it('says in one line how to build, exit 1', async () => {
    const clone = join(work, 'clone')
    mkdirSync(join(clone, 'bin'), { recursive: true })
    copyFileSync(join(root, 'bin', 'chronicle.mjs'), join(clone, 'bin', 'chronicle.mjs'))
    expect(await sh(process.execPath, [join(clone, 'bin', 'chronicle.mjs'), '--version'], clone)).toEqual({
      code: 1,
      stdout: '',
      stderr: `chronicle: ${join(clone, 'dist', 'cli.js')} is missing: run \`npm run build\` (or \`npm ci\`) in ${clone}\n`,
    })
  })
})
