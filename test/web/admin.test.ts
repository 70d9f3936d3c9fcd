import { createRequire } from 'node:module'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { buildPage, launch, prepare, type Served, screenshot, serve, tempDir, watchProblems } from './helpers.js'

/**
 * The admin page in a real Chromium (docs/WEB.md "Managing"): a token
 * created with a role and an expiry, its secret shown once and
 * working; listed; revoked by its button, after which it no longer works.
 * The MCP servers' state from the log, followed while one is connecting.
 * The attacker names the token.
 */

const HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">bot'
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js')

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
const problems: string[] = []

prepare(async () => {
  dir = tempDir('admin')
  root = buildPage()
  browser = await launch()
  server = await serve({
    data: join(dir, 'data'),
    directory: join(dir, 'work'),
    root,
    script: { steps: [] },
    config: {
      // a server that answers nothing and exits after a while: the page opens while it is still connecting
      mcp: [
        {
          name: 'broken',
          type: 'local',
          command: [process.execPath, '-e', 'setTimeout(() => {}, 6000)'],
          environment: {},
        },
      ],
    },
  })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  page = await context.newPage()
  watchProblems(page, problems)
  await page.route('**/__axe.min.js', (route) => route.fulfill({ path: AXE, contentType: 'text/javascript' }))
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

const whoami = (token: string) => fetch(`${server.url}/whoami`, { headers: { authorization: `Bearer ${token}` } })

describe('the admin page', () => {
  it('creates a token with its role and expiry, and shows its secret once; the secret works', async () => {
    await page.getByRole('link', { name: 'Admin' }).click()
    await page.getByRole('heading', { level: 1, name: 'Admin' }).waitFor()
    await page.getByLabel('Name').fill(HOSTILE_NAME)
    await page.getByLabel('Role').selectOption('audit')
    await page.getByLabel('Expires (optional: 30d, 12h or a date)').fill('30d')
    await page.getByRole('button', { name: 'Create token' }).click()
    const secret = await page.getByLabel(`Secret of ${HOSTILE_NAME}`).inputValue()
    expect(secret).toMatch(/^tok_\w+\.[\w-]{40,}$/)
    expect(await (await whoami(secret)).json()).toMatchObject({ name: HOSTILE_NAME, role: 'audit' })
    const row = page.getByRole('row').filter({ hasText: HOSTILE_NAME })
    expect(await row.getByRole('cell').nth(1).textContent()).toBe('audit')
    expect(await row.getByRole('cell').nth(3).textContent()).toMatch(/^active until /)
    expect(await page.locator('img').count()).toBe(0)
    await page.getByRole('button', { name: 'I have kept it' }).click()
    expect(await page.getByLabel(`Secret of ${HOSTILE_NAME}`).count()).toBe(0) // shown once: gone for good
    await page.reload()
    await page.getByRole('heading', { level: 1, name: 'Admin' }).waitFor()
    await page.getByRole('row').filter({ hasText: HOSTILE_NAME }).waitFor()
    expect(await page.content()).not.toContain(secret.split('.')[1])
  })

  it('revokes it: the list says so and the secret stops working', async () => {
    await page.getByLabel('Name').fill('ci')
    await page.getByRole('button', { name: 'Create token' }).click()
    const token = await page.getByLabel('Secret of ci').inputValue()
    expect((await whoami(token)).status).toBe(200)
    await page.getByRole('button', { name: 'Revoke ci' }).click()
    await page
      .getByRole('row')
      .filter({ hasText: 'ci' })
      .getByText(/^revoked /)
      .waitFor()
    expect((await whoami(token)).status).toBe(401)
  })

  it('shows each MCP server’s state from the log', async () => {
    const item = page.getByRole('listitem').filter({ hasText: 'broken' })
    await item.waitFor()
    await expect.poll(async () => item.locator('.badge').textContent(), { timeout: 20_000 }).toBe('failed')
    await screenshot(page, 'admin')
    await page.addScriptTag({ url: '/__axe.min.js' })
    const result = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run: () => Promise<{ violations: { id: string }[] }> } }).axe
      return (await axe.run()).violations.map((v) => v.id)
    })
    expect(result).toEqual([])
    expect(problems).toEqual([])
  })
})
