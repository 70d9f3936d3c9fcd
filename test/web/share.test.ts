import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, loggedIn, prepare, type Served, serve, tempDir } from './helpers.js'

/**
 * Sharing from the page (docs/API.md "Shares") in a real browser against a
 * real Chronicle: the owner makes a link in the session's details; a second
 * browser context opens it, sees the banner and the transcript, and is
 * refused another session; the owner revokes the link and the second page is
 * closed within a second.
 */

const SCRIPT: Script = { steps: [{ when: { userContains: 'say hello' }, text: 'Hello to the shared page.' }] }

let dir: string
let root: string
let browser: Browser
let server: Served

const owner = (method: string, path: string, body?: unknown) =>
  fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${server.chronicle.token.token}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })

async function session(title: string, prompt?: string): Promise<string> {
  const res = await owner('POST', '/sessions', { title })
  const id = ((await res.json()) as { session: { id: string } }).session.id
  if (prompt)
    expect(
      (await owner('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: prompt }] })).status,
    ).toBe(200)
  return id
}

prepare(async () => {
  dir = tempDir('share')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('sharing a session from the page', () => {
  it('a link made in the page opens in another browser: banner, transcript, nothing else; revoking closes it within 1 s', async () => {
    const shared = await session('shared work', 'say hello')
    const other = await session('private work')

    const first = await loggedIn(browser, server.chronicle)
    await first.goto(`${server.url}/#/s/${shared}`)
    const panel = first.locator('section.shares')
    await panel.getByLabel('Name').fill('for bob')
    await panel.getByRole('button', { name: 'Create link' }).click()
    const link = await panel.getByLabel('Share link').inputValue()
    expect(link).toMatch(new RegExp(`^${server.url}/login#shr_\\w+\\.[\\w-]{43}$`))
    await panel.getByText('for bob').waitFor()

    const visitor = await browser.newContext()
    const second = await visitor.newPage()
    await second.goto(link)
    const banner = second.getByRole('note')
    await banner.waitFor()
    expect(await banner.textContent()).toMatch(/^Shared with you by owner as for bob: read only, until /)
    // the list holds the shared session only
    await second.getByRole('link', { name: 'shared work' }).waitFor()
    expect(await second.getByRole('link', { name: 'private work' }).count()).toBe(0)
    await banner.getByRole('link', { name: 'Open the shared session' }).click()
    await second.locator('.transcript .part.text', { hasText: 'Hello to the shared page.' }).waitFor()
    // a visitor manages no shares: the panel is not shown
    expect(await second.locator('section.shares').count()).toBe(0)
    // another session is refused
    await second.goto(`${server.url}/#/s/${other}`)
    await second
      .getByText(/FORBIDDEN|does not reach/)
      .first()
      .waitFor()

    await second.goto(`${server.url}/#/s/${shared}`)
    await second.locator('.transcript .part.text', { hasText: 'Hello to the shared page.' }).waitFor()
    const started = Date.now()
    await panel.getByRole('button', { name: 'Revoke for bob' }).click()
    await second.locator('.connection', { hasText: 'Disconnected' }).waitFor({ timeout: 1000 })
    expect(Date.now() - started).toBeLessThan(1000)
    expect((await visitor.request.get(`${server.url}/whoami`)).status()).toBe(401)

    // the link no longer logs in
    const late = await browser.newContext()
    const third = await late.newPage()
    await third.goto(link)
    await third.getByRole('heading', { name: 'This login link is invalid or has expired' }).waitFor()
    await Promise.all([visitor.close(), late.close(), first.context().close()])
  })
})
