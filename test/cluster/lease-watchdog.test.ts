import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { watchLease, writeLease } from '../../src/tools/lease-watchdog.js'

/**
 * The tools' watchdog (docs/CLUSTER.md "Side effects the database cannot fence"): a process outside the node
 * that kills a tool's process group once the node's lease, as its lease file says, has run out — what stops
 * the tools of a node that is frozen, or killed, while another node resumes its runs.
 */
/** Whether a process of the group still runs (a killed one's zombie, left to be reaped, does not count). */
const alive = (group: number) =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .some((pid) => {
      try {
        // pid (comm) state ppid pgrp …: comm may hold spaces, so read after its closing parenthesis
        const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
        return Number(fields[2]) === group && fields[0] !== 'Z'
      } catch {
        return false // ended while listed
      }
    })

async function gone(group: number, withinMs: number): Promise<boolean> {
  const end = Date.now() + withinMs
  while (Date.now() < end) {
    if (!alive(group)) return true
    await new Promise((r) => setTimeout(r, 20))
  }
  return !alive(group)
}

describe('the lease watchdog', () => {
  const dirs: string[] = []
  const groups: number[] = []
  afterEach(() => {
    for (const g of groups.splice(0))
      try {
        process.kill(-g, 'SIGKILL')
      } catch {
        // gone
      }
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
  })
  const tool = () => {
    // a shell and its child in a group of their own, as bash runs a command
    const child = spawn('/bin/sh', ['-c', 'sleep 30 & sleep 30'], { detached: true, stdio: 'ignore' })
    groups.push(child.pid as number)
    return child.pid as number
  }
  const leaseFile = () => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-lease-'))
    dirs.push(dir)
    return join(dir, 'cluster-lease')
  }

  it('leaves the group alone while the lease runs, and kills all of it once the lease is over', async () => {
    const file = leaseFile()
    writeLease(file, Date.now() + 60_000)
    const group = tool()
    watchLease(group, file)
    await new Promise((r) => setTimeout(r, 500))
    expect(alive(group)).toBe(true)
    writeLease(file, Date.now() + 300) // no heartbeat renews it: the node is frozen or dead
    expect(await gone(group, 2_000)).toBe(true)
  })

  it('kills the group at once when there is no lease to read', async () => {
    const group = tool()
    watchLease(group, join(leaseFile(), 'missing'))
    expect(await gone(group, 2_000)).toBe(true)
  })

  it('kills a server’s process alone, not the group it shares with the node, once the lease is over', async () => {
    const file = leaseFile()
    writeLease(file, Date.now() + 60_000)
    // an MCP or language server: a child in the node's own process group (this test's)
    const server = spawn('sleep', ['30'], { stdio: 'ignore' })
    const pid = server.pid as number
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      server.on('exit', (_code, signal) => resolve(signal)),
    )
    watchLease(pid, file, 'process')
    await new Promise((r) => setTimeout(r, 500))
    expect(server.exitCode).toBeNull()
    writeLease(file, Date.now() + 300)
    // killed alone: had its group been killed, this test's worker (the same group) would have died with it
    expect(await exited).toBe('SIGKILL')
  })
})
