import { execFileSync, spawnSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'

/**
 * A throwaway PostgreSQL server for tests and benchmarks: a fresh cluster in a
 * temporary directory, on a free loopback port, trust authentication, torn
 * down by `stop`. The server refuses to run as root, so as root the cluster
 * belongs to the `postgres` user Debian's package creates (`.ci/run` installs
 * it). `CHRONICLE_TEST_DATABASE_URL` names an existing server instead.
 * Each `database()` is a new, empty database on it.
 */
export interface PostgresServer {
  /** a connection URL to the maintenance database */
  readonly url: string
  /** a new, empty database: its URL */
  database(): Promise<string>
  /** the server killed (`pg_ctl stop -m immediate`: no shutdown checkpoint, as a crash), then started again */
  crash(): Promise<void>
  restart(): Promise<void>
  /** the server stopped for good */
  stop(): Promise<void>
  /**
   * CPU (user + system, ms) the server's processes have used since it started, ended backends included;
   * undefined for a server these tests do not own (CHRONICLE_TEST_DATABASE_URL). What a bench adds to its own.
   */
  cpuMs(): number | undefined
}

const USER = 'chronicle'

export async function startPostgres(): Promise<PostgresServer> {
  const given = process.env.CHRONICLE_TEST_DATABASE_URL
  if (given)
    return onServer(given, {
      crash: async () => {
        throw new Error('CHRONICLE_TEST_DATABASE_URL names a server these tests do not own: it cannot be crashed')
      },
      restart: async () => {},
      stop: async () => {},
      cpuMs: () => undefined,
    })
  const bin = binDir()
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-pg-'))
  const asRoot = process.getuid?.() === 0
  const owner = asRoot ? 'postgres' : userInfo().username
  if (asRoot) {
    const { uid, gid } = postgresUser()
    chownSync(dir, uid, gid)
  }
  chmodSync(dir, 0o700)
  const run = (tool: string, args: string[]) => {
    const command = asRoot ? 'runuser' : join(bin, tool)
    const argv = asRoot ? ['-u', owner, '--', join(bin, tool), ...args] : args
    const r = spawnSync(command, argv, { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`${tool} failed (${r.status}): ${r.stderr || r.stdout}`)
  }
  const data = join(dir, 'data')
  run('initdb', ['-D', data, '-A', 'trust', '-U', USER, '--no-sync', '-E', 'UTF8'])
  const port = await freePort()
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=200`
  const start = () => run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-w', '-o', options, 'start'])
  const kill = () => run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
  start()
  return onServer(`postgres://${USER}@127.0.0.1:${port}/postgres`, {
    async crash() {
      kill()
    },
    async restart() {
      start()
    },
    async stop() {
      try {
        kill()
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    cpuMs: () => clusterCpuMs(data),
  })
}

function onServer(url: string, control: Pick<PostgresServer, 'crash' | 'restart' | 'stop' | 'cpuMs'>): PostgresServer {
  let n = 0
  return {
    url,
    async database() {
      const name = `chronicle_${process.pid}_${Date.now().toString(36)}_${++n}`
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      try {
        await admin.query(`CREATE DATABASE ${name}`)
      } finally {
        await admin.end()
      }
      const u = new URL(url)
      u.pathname = `/${name}`
      return u.toString()
    },
    ...control,
  }
}

/** Debian keeps the server's programs out of PATH: /usr/lib/postgresql/<major>/bin, the newest. */
function binDir(): string {
  const root = '/usr/lib/postgresql'
  if (existsSync(root)) {
    const majors = readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))
    for (const major of majors) if (existsSync(join(root, major, 'bin', 'initdb'))) return join(root, major, 'bin')
  }
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim()
  } catch {
    throw new Error(
      'no PostgreSQL server programs found: apt-get install postgresql (or set CHRONICLE_TEST_DATABASE_URL)',
    )
  }
}

/**
 * The postmaster's CPU with its ended children's (which it waited for), plus its live children's, from /proc
 * (stat fields 14–17: utime, stime, cutime, cstime, in clock ticks of 10 ms).
 */
function clusterCpuMs(data: string): number | undefined {
  let postmaster: number
  try {
    postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  } catch {
    return undefined
  }
  const stat = (pid: string | number) => {
    try {
      return (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ')
    } catch {
      return undefined // ended meanwhile
    }
  }
  const own = stat(postmaster)
  if (!own) return undefined
  let ticks = [11, 12, 13, 14].reduce((n, i) => n + Number(own[i]), 0)
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    const fields = stat(pid)
    if (fields && Number(fields[1]) === postmaster) ticks += Number(fields[11]) + Number(fields[12])
  }
  return ticks * 10
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
  return { uid: id('-u'), gid: id('-g') }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}
