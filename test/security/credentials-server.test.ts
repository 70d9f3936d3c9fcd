import { rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CREDENTIALS, type CredentialHome, credentialHome, leaked, USER_HIDE } from './credentials-fixture.js'
import { type HostileServer, results, rows, startHostile } from './hostile-server.js'

/**
 * The user's credentials through a real server (docs/SECURITY.md "What the
 * sandbox hides"): `chronicle serve` started with HOME pointing at a fake home
 * full of secrets, the user's rules allowing every command and every path
 * outside the workspace. The workspace is hostile: it ships a
 * `.chronicle/chronicle.json` and a `chronicle.json` that reveal everything,
 * which the server never reads. A second server, whose user's config reveals
 * the same paths, shows that the commands do reach them.
 */

const ALLOW_ALL = [
  { permission: 'bash', pattern: '*', action: 'allow' },
  { permission: 'external_directory', pattern: '*', action: 'allow' },
]
const REVEAL_ALL = { sandbox: { reveal: CREDENTIALS.map(([, entry]) => entry) } }

const bash = (command: string) => ({ name: 'bash', input: { command } })

/** A script in which the model tries every way to the secrets the fixture made in `home`. */
function hostileSteps({ home }: { home: string }) {
  const files = CREDENTIALS.map(([path]) => `${home}/${path}`).join(' ')
  return rows({
    '[bash]': [
      bash(`cat ${files} 2>&1`),
      bash(`cat link-* 2>&1`),
      bash('find ~ -type f -exec cat {} + 2>&1'),
      bash('cd ~ && tar -cf - . 2>/dev/null | tar -xOf -'),
      bash('cp -r ~ ./stolen 2>&1; find ./stolen -type f -exec cat {} +; rm -rf ./stolen'),
    ],
    '[read]': [{ name: 'read', input: { filePath: `${home}/.ssh/id_ed25519` } }],
  })
}

async function serve(config: Record<string, unknown>): Promise<{ server: HostileServer; h: CredentialHome }> {
  const server = await startHostile({
    config,
    under: '/var/tmp', // not under the sandbox's own /tmp
    files: { '.chronicle/chronicle.json': JSON.stringify(REVEAL_ALL), 'chronicle.json': JSON.stringify(REVEAL_ALL) },
    steps: hostileSteps,
  })
  // made after the server started: what is hidden is looked up when each command runs
  return { server, h: credentialHome(dirname(server.home)) }
}

describe('a real server hides the credentials in its HOME', () => {
  let server: HostileServer
  let h: CredentialHome
  beforeAll(async () => {
    ;({ server, h } = await serve({ permission: ALLOW_ALL, sandbox: { hide: USER_HIDE } }))
  }, 60_000)
  afterAll(async () => {
    await server.stop().catch(() => undefined)
    rmSync(h.root, { recursive: true, force: true })
  })

  it('cat, a symlink, find, tar and cp through bash return none of them; the rest of HOME is read', async () => {
    const outputs = results(await server.events(await server.prompt('[bash]')))
    expect(outputs).toHaveLength(5)
    for (const output of outputs) expect(leaked(h, output)).toEqual([])
    expect(outputs[2]).toContain('VISIBLE-NOTES')
    expect(outputs[3]).toContain('VISIBLE-CARGO-CONFIG')
  })

  it('read asks `credentials` for the key; rejected, the model gets nothing', async () => {
    const { session } = (await server.api('POST', '/sessions', { directory: h.workspace })) as {
      session: { id: string }
    }
    await server.api('POST', `/sessions/${session.id}/inputs`, { parts: [{ type: 'text', text: '[read]' }] })
    const requested = await waitFor(server, session.id, 'permission.requested')
    expect(requested.data).toMatchObject({ permission: 'credentials', patterns: [h.file(0)] })
    await server.api('POST', `/sessions/${session.id}/permissions/${requested.data.requestId}`, { reply: 'reject' })
    await waitFor(server, session.id, 'run.finished')
    const events = await server.events(session.id)
    expect(results(events)).toEqual([expect.stringMatching(/^denied: /)])
    expect(leaked(h, JSON.stringify(events))).toEqual([])
  })

  it('no secret reached the log', async () => {
    const { bytes, exported } = await server.stop()
    for (const i of CREDENTIALS.keys()) {
      expect(bytes.includes(Buffer.from(h.secret(i)))).toBe(false)
      expect(exported).not.toContain(h.secret(i))
    }
  })
})

describe("the user's `sandbox.reveal` takes them back", () => {
  let server: HostileServer
  let h: CredentialHome
  beforeAll(async () => {
    ;({ server, h } = await serve({ permission: ALLOW_ALL, ...REVEAL_ALL }))
  }, 60_000)
  afterAll(async () => {
    await server.stop().catch(() => undefined)
    rmSync(h.root, { recursive: true, force: true })
  })

  it('the same commands return every one', async () => {
    const outputs = results(await server.events(await server.prompt('[bash]')))
    const every = CREDENTIALS.map((_, i) => i)
    for (const output of outputs) expect(leaked(h, output)).toEqual(every)
  })
})

async function waitFor(server: HostileServer, sessionId: string, type: string) {
  const deadline = Date.now() + 20_000
  for (;;) {
    const found = (await server.events(sessionId)).find((e) => e.type === type)
    if (found) return found
    if (Date.now() > deadline) throw new Error(`no ${type} in ${sessionId}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}
