import { openStore } from '../../src/projections/open.js'
import { userInfo } from 'node:os'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { run, runToEnd } from './helpers.js'

/** Real processes start in these tests: a generous timeout for a loaded 2-core CI machine. */
const SLOW = 90_000

/** Graceful shutdown mid-run, then the offline commands on the data it left: verify, export, import, rebuild. */

const dir = mkdtempSync(join(tmpdir(), 'chronicle-life-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('shutdown and offline commands', () => {
  it(
    'SIGTERM during a run exits cleanly; the log verifies, exports, imports elsewhere and rebuilds',
    async () => {
      const script = join(dir, 'script.json')
      // quick answers, except "slow", which streams for ~20 s
      writeFileSync(
        script,
        JSON.stringify({
          chunkSize: 4,
          steps: [
            { when: { userContains: 'slow' }, delayMs: 100, text: 'z'.repeat(800) },
            { when: { afterToolResult: false }, text: 'A quick answer.' },
          ],
        }),
      )
      const data = join(dir, 'data')
      const env = {
        CHRONICLE_DATA_DIR: data,
        CHRONICLE_PORT: '0',
        CHRONICLE_MODEL: `scripted:${script}`,
        CHRONICLE_LOG_LEVEL: 'warn',
      }
      const server = run(['serve'], env, dir)
      const [, url] = await server.waitFor(/listening on (http:\/\/\S+)/)
      const token = readFileSync(join(data, 'token'), 'utf8').trim()
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(`${url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body !== undefined && { 'content-type': 'application/json' }),
          },
          ...(body !== undefined && { body: JSON.stringify(body) }),
        })
        return (await res.json()) as Record<string, any>
      }
      const quick = (await call('POST', '/sessions', { directory: dir })).session.id as string
      expect(
        (await call('POST', `/sessions/${quick}/inputs?wait=true`, { parts: [{ type: 'text', text: 'hi' }] })).text,
      ).toBe('A quick answer.')
      const slow = (await call('POST', '/sessions', { directory: dir })).session.id as string
      await call('POST', `/sessions/${slow}/inputs`, { parts: [{ type: 'text', text: 'be slow' }] })
      for (let i = 0; i < 100; i++) {
        const events = await call('GET', `/sessions/${slow}/events?limit=5000`)
        if ((events.events as { type: string }[]).some((e) => e.type === 'text.delta')) break
        await new Promise((r) => setTimeout(r, 50))
      }
      const stoppedAt = Date.now()
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      expect(Date.now() - stoppedAt).toBeLessThan(10_000) // it did not wait for the 20 s run

      const verify = await runToEnd(['verify'], { CHRONICLE_DATA_DIR: data })
      expect([verify.code, verify.stdout]).toEqual([
        0,
        expect.stringMatching(
          /^chain intact: \d+ events; head \d+:[0-9a-f]{64}\n2 sessions checked, 0 differences\n(search index through seq \d+ of \d+: \d+ documents checked, 0 differences|no search index \(the server builds it when it starts\))\n$/,
        ),
      ])

      const file = join(dir, 'quick.jsonl')
      const exported = await runToEnd(['export', quick, '--out', file], { CHRONICLE_DATA_DIR: data })
      expect(exported.code).toBe(0)
      const lines = readFileSync(file, 'utf8').trim().split('\n')
      expect(JSON.parse(lines[0] as string)).toEqual({ chronicle: 'session-export', format: 2, sessionId: quick })
      // the header, the events, then the blobs the model steps were compiled from (docs/AUDIT.md)
      const blobs = lines.filter((l) => l.startsWith('{"blob":')).length
      expect(blobs).toBeGreaterThan(0)
      const eventLines = lines.length - blobs // the marker the import adds takes the header's place in the count

      // the same session as an ATIF trajectory (docs/API.md "ATIF export")
      const atif = await runToEnd(['export', quick, '--format', 'atif'], { CHRONICLE_DATA_DIR: data })
      expect(atif.code).toBe(0)
      expect(JSON.parse(atif.stdout)).toMatchObject({ schema_version: 'ATIF-v1.6', session_id: quick })
      const badFormat = await runToEnd(['export', quick, '--format', 'xml'], { CHRONICLE_DATA_DIR: data })
      expect([badFormat.code, badFormat.stderr]).toEqual([
        2,
        expect.stringContaining('export --format is jsonl or atif'),
      ])

      const other = { CHRONICLE_DATA_DIR: join(dir, 'other'), CHRONICLE_URL: 'http://127.0.0.1:1' }
      // an import makes a new, read-only session (its events and a session.imported marker)
      const imported = await runToEnd(['import', file], other)
      expect(imported.code).toBe(0)
      const copy = /^(ses_\w+) → (ses_\w+)\n/.exec(imported.stdout)?.slice(1) ?? []
      expect(copy[0]).toBe(quick)
      const copied = copy[1] as string
      expect(copied).not.toBe(quick)
      expect(imported.stdout).toBe(
        `${quick} → ${copied}\nimported ${quick} as ${copied}: ${eventLines} events appended, 1 new sessions, read-only (fork one with --dir <path> to continue it)\n`,
      )
      expect(imported.stderr).toContain('verifying 1/1')
      // an offline import is the local user's: named on the marker
      const importedLog = openStore(join(dir, 'other', 'chronicle.db'))
      const marker = importedLog.readSession(copied).at(-1)
      importedLog.close()
      expect(marker).toMatchObject({
        type: 'session.imported',
        meta: { command: 'import', by: { id: `local:${userInfo().username}`, name: userInfo().username } },
      })

      const rebuilt = await runToEnd(['rebuild'], other)
      expect(rebuilt.code).toBe(0)
      expect(rebuilt.stdout).toMatch(
        new RegExp(
          `^rebuilt 1 sessions from ${eventLines} events in \\d+ ms\\nrebuilt the search index: \\d+ documents from \\d+ events in \\d+ ms\\n$`,
        ),
      )
      expect(rebuilt.stderr).toMatch(/rebuilding, events (\d+)\/\1\n/)

      // a read model that drifted from the log: verify says where, and exits 1
      const db = new Database(join(dir, 'other', 'chronicle.db'))
      db.prepare("UPDATE sessions SET data = json_set(data, '$.title', 'tampered') WHERE id = ?").run(copied)
      db.close()
      const drifted = await runToEnd(['verify'], other)
      expect(drifted.code).toBe(1)
      expect(drifted.stdout).toContain(`DIFF ${copied} session ${copied}`)
      expect(drifted.stdout).toMatch(
        /1 sessions checked, 1 differences\nsearch index through seq \d+ of \d+: \d+ documents checked, 0 differences\n$/,
      )
    },
    SLOW,
  )
})
