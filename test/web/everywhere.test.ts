import { createRequire } from 'node:module'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import {
  buildPage,
  launch,
  prepare,
  type Served,
  screenshot,
  sendMessage,
  serve,
  tempDir,
  watchProblems,
} from './helpers.js'

/**
 * The page everywhere (docs/WEB.md "Everywhere"): on a phone (390 px) and a
 * wide screen, in the light and the dark theme (`prefers-color-scheme`),
 * every view — the list, a session with Markdown, code, a tool call and a
 * permission waiting, the scrubber, the admin page — has no axe-core
 * violation of any impact and nothing wider than the window; a screenshot of
 * each is saved. The shortcuts are listed on `?`.
 */

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')
const ANSWER = [
  '## Result',
  '',
  'The **parser** now handles `a | b`; see [the spec](https://example.com/spec).',
  '',
  '```ts',
  "export const parse = (text: string): string[] => text.split('|').map((s) => s.trim())",
  '```',
  '',
  '| case | before | after |',
  '|---|---|---|',
  '| `a|b` | fails | passes |',
].join('\n')

const SCRIPT: Script = {
  chunkSize: 256,
  uniqueCallIds: true,
  steps: [
    { when: { userContains: 'explain' }, text: ANSWER, usage: { input: 900, output: 120 } },
    {
      when: { userContains: 'list files', afterToolResult: false },
      toolCalls: [{ name: 'bash', input: { command: 'ls', description: 'list the files' } }],
    },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let session: string

prepare(async () => {
  dir = tempDir('everywhere')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  // one session with a rendered answer and a permission waiting, made once through the page
  const page = await open(1280, 'light')
  await page.getByLabel('Title (optional)').fill('everywhere')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/s\/ses_/)
  session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
  await sendMessage(page, 'explain the fix')
  await page.getByRole('heading', { name: 'Result' }).waitFor()
  await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()
  await sendMessage(page, 'list files')
  await page.getByRole('button', { name: 'Allow once' }).waitFor()
  await page.context().close()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

const problems: string[] = []

async function open(width: number, scheme: 'light' | 'dark'): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 860 }, colorScheme: scheme })
  const page = await context.newPage()
  watchProblems(page, problems)
  await page.route('**/__axe.min.js', (route) => route.fulfill({ path: AXE, contentType: 'text/javascript' }))
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  return page
}

/** Every axe-core violation, of any impact, with where it is. */
async function axe(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ url: '/__axe.min.js' })
  return page.evaluate(async () => {
    type Result = { violations: { id: string; nodes: { target: string[] }[] }[] }
    const run = (window as unknown as { axe: { run: () => Promise<Result> } }).axe.run
    return (await run()).violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
  })
}

/** Whatever is wider than the window (a phone would scroll sideways). */
const overflow = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)

describe.each([
  [390, 'light'],
  [390, 'dark'],
  [1280, 'light'],
  [1280, 'dark'],
] as const)('at %i px in the %s theme', (width, scheme) => {
  it('the list, a session, the scrubber and the admin page: no axe violation, nothing wider than the window', async () => {
    const page = await open(width, scheme)
    const views: [string, () => Promise<void>][] = [
      ['list', async () => {}],
      [
        'session',
        async () => {
          await page.goto(`${server.url}/#/s/${session}`)
          await page.getByRole('button', { name: 'Allow once' }).waitFor()
          await page.getByRole('heading', { name: 'Result' }).waitFor()
        },
      ],
      [
        'scrubber',
        async () => {
          await page.goto(`${server.url}/#/s/${session}@`)
          await page.getByRole('heading', { name: 'Result' }).waitFor()
        },
      ],
      [
        'admin',
        async () => {
          await page.goto(`${server.url}/#/admin`)
          await page.getByRole('heading', { level: 2, name: 'Tokens' }).waitFor()
        },
      ],
    ]
    for (const [name, show] of views) {
      await show()
      await screenshot(page, `${name}-${width}-${scheme}`)
      expect({ view: name, violations: await axe(page), overflow: await overflow(page) }).toEqual({
        view: name,
        violations: [],
        overflow: 0,
      })
    }
    expect(problems).toEqual([])
    await page.context().close()
  })
})

describe('the keyboard', () => {
  it('? lists the shortcuts and Escape closes them; / goes to the message box; g s goes to the list', async () => {
    const page = await open(1280, 'light')
    await page.goto(`${server.url}/#/s/${session}`)
    await page.getByRole('heading', { name: 'Result' }).waitFor()
    await page.keyboard.press('?')
    const dialog = page.getByRole('dialog', { name: 'Keyboard shortcuts' })
    await dialog.waitFor()
    expect(await dialog.locator('kbd').allTextContents()).toEqual(['?', '/', 'g then s', 'Escape', 'Enter'])
    await page.keyboard.press('Escape')
    await dialog.waitFor({ state: 'hidden' })
    await page.keyboard.press('/')
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('composer-text')
    await page.keyboard.type('?') // typed into the box, not a shortcut
    expect(await dialog.isVisible()).toBe(false)
    await page.locator('h1').focus()
    await page.keyboard.press('g')
    await page.keyboard.press('s')
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    expect(problems).toEqual([])
    await page.context().close()
  })
})
