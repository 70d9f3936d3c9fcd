import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { type Browser, chromium, type Page } from 'playwright-core'
import { beforeAll, beforeEach } from 'vitest'
import { type ChronicleConfig, loadConfig } from '../../src/config.js'
import { createChronicle, type Chronicle } from '../../src/main.js'
import type { Script } from '../../src/runtime/model/scripted-model.js'

/**
 * What the page's specs share: the page built by its real build
 * (scripts/build-web.mjs) into a temp dir, a real Chronicle serving it
 * (createChronicle, as test/http/helpers.ts starts one) with the scripted
 * model, and Debian's Chromium driven by playwright-core. No browser means
 * the specs fail: `launch` throws and `prepare` fails every test with it.
 */

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const CHROMIUM = '/usr/bin/chromium'
/** screenshots of the views, outside the repository (.gitignore is not ours to change) */
export const ARTIFACTS = join(ROOT, 'node_modules', '.cache', 'chronicle-web-artifacts')

/** Builds the page into a fresh temp dir with the real build script; its root for `web.root`. */
export function buildPage(): string {
  const out = mkdtempSync(join(tmpdir(), 'chronicle-web-root-'))
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-web.mjs'), out], { cwd: ROOT, stdio: 'pipe' })
  return out
}

/**
 * Runs a spec file's (or describe's) setup before its tests. When the setup
 * fails — no browser could start, say — every test fails with its error:
 * vitest would otherwise mark them skipped.
 */
export function prepare(setup: () => Promise<void>, timeoutMs = 60_000): void {
  let failure: unknown
  beforeAll(async () => {
    try {
      await setup()
    } catch (err) {
      failure = err ?? new Error('setup failed')
    }
  }, timeoutMs)
  beforeEach(() => {
    if (failure !== undefined) throw failure
  })
}

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true })
}

export interface Served {
  readonly chronicle: Chronicle
  readonly url: string
  readonly port: number
  readonly logs: string[]
  stop(): Promise<void>
}

export interface ServeOptions {
  /** the data dir (kept across a restart) */
  readonly data: string
  /** sessions work here by default */
  readonly directory: string
  /** the built page */
  readonly root: string
  readonly script: Script
  /** 0: any free port */
  readonly port?: number
  /** more configuration (MCP servers, rules) */
  readonly config?: Partial<ChronicleConfig>
}

/** A real Chronicle on `data` with the scripted model, serving the page from `root`. */
export async function serve(options: ServeOptions): Promise<Served> {
  const logs: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      logs.push(String(chunk))
      done()
    },
  })
  mkdirSync(options.directory, { recursive: true })
  const scriptFile = join(options.data, '..', `script-${process.pid}.json`)
  writeFileSync(scriptFile, JSON.stringify(options.script))
  const base = loadConfig({
    env: {
      CHRONICLE_DATA_DIR: options.data,
      CHRONICLE_PORT: String(options.port ?? 0),
      CHRONICLE_MODEL: `scripted:${scriptFile}`,
      CHRONICLE_LOG_LEVEL: 'warn',
    },
    cwd: options.directory,
    configPath: false,
  })
  // the page's specs see no skills of the machine's own user (~/.config/chronicle/skills)
  const config = {
    ...base,
    titles: false,
    skillsDir: join(options.data, '..', 'config', 'skills'),
    web: { enabled: true, root: options.root },
    ...options.config,
  }
  const chronicle = await createChronicle(config, { logDestination: sink, directory: options.directory })
  const url = await chronicle.start()
  return {
    chronicle,
    url,
    port: Number(new URL(url).port),
    logs,
    stop: () => chronicle.stop(),
  }
}

/** A temp dir for one spec file: `data/` and `work/` under it. */
export function tempDir(name: string): string {
  return mkdtempSync(join(tmpdir(), `chronicle-web-${name}-`))
}

/** Records the page's script errors and Content Security Policy violations in `problems`, which a spec expects empty. */
export function watchProblems(page: Page, problems: string[]): void {
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) problems.push(m.text())
  })
}

/** Opens a fresh login link in a new context and waits for the session list. */
export async function loggedIn(browser: Browser, chronicle: Chronicle): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  page.on('pageerror', (err) => console.error('page error:', err.message))
  await page.goto(chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  return page
}

/** Saves a screenshot of the page under ARTIFACTS; its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS, { recursive: true })
  const path = join(ARTIFACTS, `${name}.png`)
  await page.screenshot({ path, fullPage: false })
  console.info(`screenshot: ${path}`)
  return path
}

/** The texts the page shows for a session's text parts, in order. */
export function pageTexts(page: Page): Promise<string[]> {
  return page.locator('.transcript .part.text').evaluateAll((els) => els.map((e) => e.textContent ?? ''))
}

/** The texts of a session's text parts as the server holds them, in order of their messages. */
export async function serverTexts(chronicle: Chronicle, session: string, url: string): Promise<string[]> {
  const res = await fetch(`${url}/sessions/${session}/state`, {
    headers: { authorization: `Bearer ${chronicle.token.token}` },
  })
  const state = (await res.json()) as {
    messages: { id: string }[]
    parts: { messageId: string; type: string; text?: string }[]
  }
  return state.messages.flatMap((m) =>
    state.parts.filter((p) => p.messageId === m.id && p.type === 'text').map((p) => p.text ?? ''),
  )
}

/** Types a message into the composer and sends it. */
export async function sendMessage(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message', { exact: true }).fill(text)
  await page.getByRole('button', { name: 'Send' }).click()
}
