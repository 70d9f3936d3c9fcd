import { createRequire } from 'node:module'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, type Served, screenshot, serve, tempDir, prepare } from './helpers.js'

/**
 * The page without a mouse, and axe-core over its main views. Keyboard
 * only: Tab and Enter from the login link's list to a new session, a
 * prompt sent, a permission answered, the scrubber moved with the arrow
 * keys, a fork. axe-core (node_modules/axe-core/axe.min.js) is served to
 * the page from its own origin by a route, so it runs under the page's real
 * CSP (script-src 'self'), which is never bypassed; the page itself must
 * cause no CSP violation.
 */

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')
const SCRIPT: Script = {
  chunkSize: 8,
  steps: [
    { when: { userContains: 'say hello' }, text: 'Hello, keyboard.' },
    {
      when: { userContains: 'list files', afterToolResult: false },
      toolCalls: [{ id: 'call_ls', name: 'bash', input: { command: 'ls', description: 'list the files' } }],
    },
    { when: { userContains: 'list files', afterToolResult: true }, text: 'Listed.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
const violations: string[] = []

prepare(async () => {
  dir = tempDir('a11y')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  page = await context.newPage()
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text())
  })
  await page.route('**/__axe.min.js', (route) => route.fulfill({ path: AXE, contentType: 'text/javascript' }))
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

/** Presses Tab until the focused element has this accessible text (its label, text or aria-label). */
async function tabTo(name: string | RegExp, max = 60): Promise<void> {
  const seen: string[] = []
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab')
    const focused = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null
      if (!el) return ''
      const label = el.id ? document.querySelector(`label[for="${el.id}"]`)?.textContent : undefined
      return (el.getAttribute('aria-label') ?? label ?? el.textContent ?? '').trim()
    })
    seen.push(focused)
    if (typeof name === 'string' ? focused === name : name.test(focused)) return
  }
  throw new Error(`Tab never reached ${name}; focus went through: ${seen.join(' | ')}`)
}

/** axe-core's serious and critical violations on the page as it is now. */
async function axe(): Promise<{ id: string; impact: string; help: string; targets: string[] }[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ url: '/__axe.min.js' })
  const found = await page.evaluate(async () => {
    const run = (window as unknown as { axe: { run: (ctx: unknown, o: unknown) => Promise<any> } }).axe.run
    const r = await run(document, { resultTypes: ['violations'] })
    return r.violations.map((v: any) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((n: any) => String(n.target)),
    }))
  })
  return found.filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical')
}

describe('keyboard only', () => {
  it('goes from the login link to a new session, sends, answers a permission, scrubs and forks', async () => {
    await page.goto(server.chronicle.loginLink().url)
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    expect(await axe()).toEqual([])
    await screenshot(page, 'list')

    await tabTo('New session')
    await page.keyboard.press('Enter')
    await page.waitForURL(/#\/s\/ses_/)
    await page.getByRole('heading', { level: 1, name: 'New session' }).waitFor()

    await tabTo('Message')
    await page.keyboard.type('say hello')
    await page.keyboard.press('Enter')
    await page.locator('.part.text', { hasText: 'Hello, keyboard.' }).waitFor()

    await page.keyboard.type('list files')
    await page.keyboard.press('Enter')
    await page.getByRole('region', { name: 'Permission request: bash' }).waitFor()
    expect(await axe()).toEqual([])
    await tabTo('Allow once')
    await page.keyboard.press('Enter')
    await page.locator('.part.text', { hasText: 'Listed.' }).waitFor()
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()
    expect(await axe()).toEqual([])

    // the scrubber: to it by Tab, back one event with the arrow key
    await page.getByRole('heading', { level: 1 }).focus()
    await tabTo('Time travel')
    await page.keyboard.press('Enter')
    const shown = page.getByText(/^Showing the session right after seq (\d+)\.$/)
    await shown.waitFor()
    const head = Number(/seq (\d+)/.exec((await shown.textContent()) ?? '')?.[1])
    await tabTo('Event seq')
    await page.keyboard.press('ArrowLeft')
    await page.getByText(`Showing the session right after seq ${head - 1}.`).waitFor()
    await page.waitForURL(new RegExp(`@${head - 1}$`))
    expect(await axe()).toEqual([])

    await tabTo('Fork here')
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { level: 1, name: 'New session (fork)' }).waitFor()
    expect(violations).toEqual([])
  })
})
