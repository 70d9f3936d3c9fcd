import { execFileSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { decidePermission } from '../../src/commands/permission.js'
import { execute } from '../../src/commands/execute.js'
import { getParts, getSession } from '../../src/projections/queries/read-model.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import type { NetworkUse } from '../../src/events/catalogue.js'
import { createBashTool } from '../../src/tools/builtin/bash.js'
import type { ProxyPolicy } from '../../src/tools/net/call-proxy.js'
import { parseHostPattern, type HostPattern } from '../../src/tools/net/host-list.js'
import type { Resolver } from '../../src/tools/net/resolve.js'
import { bwrapSandbox } from '../../src/tools/sandbox.js'
import { harness, text } from '../runtime/helpers.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * The network by host (docs/SECURITY.md "The network by host"): a confined
 * command reaches only the hosts on the user's `sandbox.network` list,
 * through its call's own proxy, and every connection it opens or is refused
 * is on the record. Real bubblewrap, the real bash tool and permission gate,
 * real curl and node inside, and real servers on 127.0.0.1 only: the names
 * the commands use are mapped to them by the proxy's resolver hook
 * (`net.resolve`, the same seam webfetch's specs use) — `registry.test` and
 * `asked.test` are also in `allowHosts` (webfetch's list of names whose
 * address is not checked, as an intranet mirror would be), `loopback.test`
 * is not, so the address check refuses it like any name that resolves to
 * 127.0.0.1.
 */

const NODE22 = join(process.cwd(), 'node_modules', 'node', 'bin', 'node')

let temp: { dir: string; cleanup: () => void }
let workspace: string
let http: Server
let https: Server
let httpPort: number
let httpsPort: number
const hits: string[] = []
/** 8 MiB the servers answer `/big` with, and what each of the plain server's connections read and wrote */
const BIG = randomBytes(8 * 1024 * 1024)
const wire = { http: [] as Wire[] }
interface Wire {
  read: number
  written: number
}

beforeAll(async () => {
  temp = tempDir('chronicle-netproxy-')
  workspace = join(temp.dir, 'work')
  mkdirSync(workspace)
  // a self-signed certificate for registry.test, made for this run; the commands trust it by file
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      join(temp.dir, 'key.pem'),
      '-out',
      join(workspace, 'cert.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=registry.test',
      '-addext',
      'subjectAltName=DNS:registry.test,DNS:asked.test',
    ],
    { stdio: 'ignore' },
  )
  http = createServer((req, res) => {
    hits.push(`${req.method === 'POST' ? 'post' : 'http'} ${req.url}`)
    if (req.method !== 'POST') return res.end(req.url === '/big' ? BIG : `plain hello ${req.url}\n`)
    const body: Buffer[] = []
    req.on('data', (chunk: Buffer) => body.push(chunk))
    req.on('end', () => res.end(`got ${createHash('sha256').update(Buffer.concat(body)).digest('hex')}\n`))
  })
  https = createTlsServer(
    { key: readFileSync(join(temp.dir, 'key.pem')), cert: readFileSync(join(workspace, 'cert.pem')) },
    (req, res) => {
      hits.push(`https ${req.url}`)
      res.end(req.url === '/big' ? BIG : `tls hello ${req.url}\n`)
    },
  )
  // the bytes on the wire of each connection, as the server saw them
  http.on('connection', (socket: Socket) =>
    socket.once('close', () => wire.http.push({ read: socket.bytesRead, written: socket.bytesWritten })),
  )
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve))
  httpPort = (http.address() as AddressInfo).port
  httpsPort = (https.address() as AddressInfo).port
})

afterAll(async () => {
  http.closeAllConnections()
  https.closeAllConnections()
  await new Promise((r) => http.close(r))
  await new Promise((r) => https.close(r))
  temp.cleanup()
})

/** Every test name the commands use resolves to this machine — the proxy's resolver hook. */
const toLocal: Resolver = async () => [{ address: '127.0.0.1', family: 4 }]

function policy(list: string[], unlisted: 'refuse' | 'ask' = 'refuse'): ProxyPolicy {
  return {
    hosts: list.map((entry) => parseHostPattern(entry) as HostPattern),
    unlisted,
    net: { allowHosts: ['registry.test', 'asked.test'], resolve: toLocal },
  }
}

interface Ran {
  readonly output: string
  /** what ctx.network received: the call's tool.network events */
  readonly network: NetworkUse[]
  readonly f: Fixture
}

/** Runs one command through the bash tool in bubblewrap with `network`; `answer` replies to each request raised. */
async function run(
  command: string,
  network: ProxyPolicy,
  answer?: (request: { permission: string; patterns: readonly string[] }, n: number) => 'once' | 'always' | 'reject',
  launcher: { perl?: null } = {},
): Promise<Ran> {
  const dataDir = join(temp.dir, 'data')
  const tool = createBashTool({
    dataDir,
    sandbox: bwrapSandbox(Object.assign({ hidden: [dataDir] }, launcher)),
    env: { PATH: process.env.PATH, HOME: temp.dir },
    network,
  })
  const f = fixture({ directory: workspace, rules: [{ permission: 'bash', pattern: '*', action: 'allow' }] })
  const network_: NetworkUse[] = []
  let done = false
  const running = tool.execute({ command }, f.ctx({ network: (use) => network_.push(use) })).finally(() => {
    done = true
  })
  const answered = new Set<string>()
  while (!done) {
    for (const request of f.requested()) {
      if (answered.has(request.requestId)) continue
      answered.add(request.requestId)
      const reply = answer?.(request, answered.size) ?? 'reject'
      await execute(
        sqlitePorts(f.store),
        f.sessionId,
        (s) => decidePermission({ type: 'reply', requestId: request.requestId, reply }, s, f.sessionId, f.ids),
        { meta: { actor: 'user', request: request.requestId }, durability: 'full' },
      )
    }
    await new Promise((r) => setTimeout(r, 5))
  }
  const { output } = await running
  return { output, network: network_, f }
}

/** A use with its byte counts replaced by whether bytes went each way. */
const shape = (use: NetworkUse) =>
  Object.assign({}, use, { bytesIn: use.bytesIn > 0, bytesOut: use.bytesOut > 0 }) as Record<string, unknown>

const REGISTRY = ['registry.test', 'loopback.test']

describe('the network by host: a listed host', () => {
  it('is reached by curl over TLS (CONNECT) and over plain HTTP, each connection on the record', async () => {
    hits.length = 0
    const { output, network } = await run(
      `curl -sS --cacert cert.pem https://registry.test:${httpsPort}/pkg && curl -sS http://registry.test:${httpPort}/plain`,
      policy(REGISTRY),
    )
    expect(output).toContain(`tls hello /pkg\nplain hello /plain\n`)
    expect(hits).toEqual(['https /pkg', 'http /plain'])
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpsPort, allowed: true, connections: 1, bytesIn: true, bytesOut: true },
      { host: 'registry.test', port: httpPort, allowed: true, connections: 1, bytesIn: true, bytesOut: true },
    ])
  })

  it("is reached by node's fetch (Node 22, which reads the proxy variables when NODE_USE_ENV_PROXY is set)", async () => {
    hits.length = 0
    // a copy inside the session directory: the sandbox shows the command its directory, not the checkout's, whose
    // path may lie under the sandbox's own fresh /tmp (a CI clone in /tmp)
    copyFileSync(NODE22, join(workspace, 'node22'))
    chmodSync(join(workspace, 'node22'), 0o755)
    const { output, network } = await run(
      `NODE_EXTRA_CA_CERTS=cert.pem ./node22 -e "fetch('https://registry.test:${httpsPort}/node').then((r) => r.text()).then((t) => process.stdout.write(t))"`,
      policy(REGISTRY),
    )
    expect(output).toContain('tls hello /node\n')
    expect(hits).toEqual(['https /node'])
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpsPort, allowed: true, connections: 1, bytesIn: true, bytesOut: true },
    ])
  })

  it('is coalesced: three connections to one host are one event with their bytes summed', async () => {
    const { network } = await run(
      `for i in 1 2 3; do curl -sS http://registry.test:${httpPort}/n$i; done`,
      policy(REGISTRY),
    )
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpPort, allowed: true, connections: 3, bytesIn: true, bytesOut: true },
    ])
  })

  it('with a port is reached on that port only', async () => {
    hits.length = 0
    const { output, network } = await run(
      `curl -sS http://registry.test:${httpPort}/ok; curl -sS --cacert cert.pem https://registry.test:${httpsPort}/no; echo "exit $?"`,
      policy([`registry.test:${httpPort}`]),
    )
    expect(output).toContain('plain hello /ok\n')
    expect(output).toContain('CONNECT tunnel failed, response 403')
    expect(hits).toEqual(['http /ok'])
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpPort, allowed: true, connections: 1, bytesIn: true, bytesOut: true },
      {
        host: 'registry.test',
        port: httpsPort,
        allowed: false,
        connections: 1,
        bytesIn: false,
        bytesOut: false,
        reason: 'HOST_NOT_LISTED',
      },
    ])
  })
})

describe('the network by host: a download', () => {
  const sha = createHash('sha256').update(BIG).digest('hex')

  it.each([
    // through a tunnel, plain HTTP inside: TLS's closing alert may cross the client's close and never be read
    ['CONNECT', '--proxytunnel '],
    ['plain HTTP', ''],
  ] as const)(
    'of 8 MiB over %s reaches a slow reader whole, and tool.network counts exactly the bytes the server sent and read',
    async (_, flags) => {
      wire.http.length = 0
      // the reader starts late and reads slowly: the proxy must hold the rest back, not lose it
      const { output, network } = await run(
        `curl -sS ${flags}http://registry.test:${httpPort}/big | (sleep 0.3; dd bs=64k 2>/dev/null | sha256sum)`,
        policy(REGISTRY),
      )
      expect(output).toContain(`${sha}  -\n`)
      await until(() => wire.http.length === 1)
      const [seen] = wire.http
      expect(network).toEqual([
        {
          host: 'registry.test',
          port: httpPort,
          allowed: true,
          connections: 1,
          bytesIn: seen?.written,
          bytesOut: seen?.read,
        },
      ])
    },
  )

  it('a request with a body is forwarded whole, as it was framed (a length, or chunks)', async () => {
    hits.length = 0
    writeFileSync(join(workspace, 'upload.bin'), BIG.subarray(0, 1024 * 1024))
    const sent = createHash('sha256')
      .update(BIG.subarray(0, 1024 * 1024))
      .digest('hex')
    const url = `http://registry.test:${httpPort}/upload`
    const { output, network } = await run(
      `curl -sS --data-binary @upload.bin ${url}; curl -sS -H 'transfer-encoding: chunked' --data-binary @upload.bin ${url}`,
      policy(REGISTRY),
    )
    expect(output).toContain(`got ${sent}\ngot ${sent}\n`)
    expect(hits).toEqual(['post /upload', 'post /upload'])
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpPort, allowed: true, connections: 2, bytesIn: true, bytesOut: true },
    ])
  })

  it('over twenty connections at once, each is forwarded and all are one event', async () => {
    const { output, network } = await run(
      `for i in $(seq 20); do curl -sS http://registry.test:${httpPort}/p$i -o p$i.txt & done; wait; cat p*.txt | sort | uniq -c | wc -l`,
      policy(REGISTRY),
    )
    expect(output).toMatch(/^20\n/)
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpPort, allowed: true, connections: 20, bytesIn: true, bytesOut: true },
    ])
  })
})

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10))
}

describe('the network by host: what is refused', () => {
  it('a host not on the list, at once, with its reason, over CONNECT and plain HTTP', async () => {
    hits.length = 0
    const { output, network, f } = await run(
      `curl -sS --cacert cert.pem https://elsewhere.test:${httpsPort}/x; echo "exit $?"; curl -sS http://elsewhere.test:${httpPort}/y`,
      policy(REGISTRY),
    )
    expect(output).toContain('curl: (56) CONNECT tunnel failed, response 403\nexit 56\n')
    expect(output).toContain(
      `HOST_NOT_LISTED: elsewhere.test:${httpPort} is not on the sandbox's network list (the user's config: sandbox.network)\n`,
    )
    expect(hits).toEqual([])
    expect(f.requested()).toEqual([])
    expect(network).toEqual([
      {
        host: 'elsewhere.test',
        port: httpsPort,
        allowed: false,
        connections: 1,
        bytesIn: 0,
        bytesOut: 0,
        reason: 'HOST_NOT_LISTED',
      },
      {
        host: 'elsewhere.test',
        port: httpPort,
        allowed: false,
        connections: 1,
        bytesIn: 0,
        bytesOut: 0,
        reason: 'HOST_NOT_LISTED',
      },
    ])
  })

  it('a listed name that resolves to loopback gets nothing (the address check after resolving)', async () => {
    hits.length = 0
    const { output, network } = await run(
      `curl -sS http://loopback.test:${httpPort}/steal; curl -sS --cacert cert.pem https://loopback.test:${httpsPort}/steal; echo "exit $?"`,
      policy(REGISTRY),
    )
    expect(output).toContain(
      `ADDRESS_REFUSED: http://loopback.test:${httpPort}/steal: loopback.test resolves to 127.0.0.1, which is loopback.`,
    )
    expect(output).toContain('CONNECT tunnel failed, response 403\nexit 56\n')
    expect(hits).toEqual([])
    expect(network.map((u) => [u.host, u.port, u.allowed, u.reason])).toEqual([
      ['loopback.test', httpPort, false, 'ADDRESS_REFUSED'],
      ['loopback.test', httpsPort, false, 'ADDRESS_REFUSED'],
    ])
  })

  it('an IP literal of this machine, in any spelling, is refused unless listed', async () => {
    hits.length = 0
    const { network } = await run(
      `curl -sS http://127.0.0.1:${httpPort}/a --noproxy ''; curl -sS http://2130706433:${httpPort}/b --noproxy ''`,
      policy(REGISTRY),
    )
    expect(hits).toEqual([])
    expect(network.map((u) => [u.host, u.port, u.allowed, u.reason])).toEqual([
      ['127.0.0.1', httpPort, false, 'HOST_NOT_LISTED'],
    ])
  })

  it('a second request sent on a forwarded connection reaches no one, listed or not', async () => {
    hits.length = 0
    const request = (host: string, path: string) =>
      `GET http://${host}:${httpPort}${path} HTTP/1.1\\r\\nhost: ${host}:${httpPort}\\r\\n\\r\\n`
    // the answer to the first is relayed as it comes (the connection is the answer's); the others follow it
    const { output, network } = await run(
      [
        // the proxy may have closed the connection by the second write: that write fails, the reading goes on
        "trap '' PIPE",
        'exec 3<>/dev/tcp/127.0.0.1/${HTTP_PROXY##*:}',
        `printf '${request('registry.test', '/first')}' >&3`,
        'sleep 0.5',
        `printf '${request('registry.test', '/second')}${request('elsewhere.test', '/third')}' >&3`,
        'timeout 3 cat <&3',
      ].join('; '),
      policy(REGISTRY),
      // `exec` with a redirection to /dev/tcp is asked for whatever the rules say: a person allows it
      (asked) => (asked.permission === 'network' ? 'reject' : 'once'),
    )
    expect(output).toContain('plain hello /first\n')
    expect(hits).toEqual(['http /first'])
    expect(network.map(shape)).toEqual([
      { host: 'registry.test', port: httpPort, allowed: true, connections: 1, bytesIn: true, bytesOut: true },
    ])
  })

  it('a direct connection that ignores the proxy variables reaches nothing: the namespace has no route out', async () => {
    hits.length = 0
    const { output, network } = await run(
      [
        `curl -sS --noproxy '*' --connect-timeout 3 http://127.0.0.1:${httpPort}/direct; echo "curl exit $?"`,
        `(echo > /dev/tcp/127.0.0.1/${httpsPort}) 2>/dev/null && echo TCP-CONNECTED || echo TCP-REFUSED`,
        `curl -sS --noproxy '*' --connect-timeout 3 http://93.184.215.14/; echo "outside exit $?"`,
      ].join('; '),
      policy(REGISTRY),
    )
    expect(output).toContain('curl exit 7\n')
    expect(output).toContain('TCP-REFUSED\n')
    expect(output).toMatch(/outside exit (7|28)\n/)
    expect(hits).toEqual([])
    // nothing reached the proxy, so it has nothing to record
    expect(network).toEqual([])
  })
})

describe('the network by host: unlistedHosts "ask"', () => {
  it('raises `network` with the host as pattern: rejected, the connection is refused; answered "once", the retry gets through', async () => {
    hits.length = 0
    const replies: string[] = []
    const { output, network, f } = await run(
      `curl -sS http://asked.test:${httpPort}/first; curl -sS http://asked.test:${httpPort}/retry`,
      policy(REGISTRY, 'ask'),
      (request, n) => {
        replies.push(`${request.permission} ${request.patterns.join(',')}`)
        return n === 1 ? 'reject' : 'once'
      },
    )
    expect(replies).toEqual(['network asked.test', 'network asked.test'])
    expect(output).toContain('HOST_DENIED: asked.test:')
    expect(output).toContain('plain hello /retry\n')
    expect(hits).toEqual(['http /retry'])
    expect(f.requested().map((r) => [r.permission, r.patterns, r.metadata])).toEqual([
      ['network', ['asked.test'], { host: 'asked.test', port: httpPort, always: ['asked.test'] }],
      ['network', ['asked.test'], { host: 'asked.test', port: httpPort, always: ['asked.test'] }],
    ])
    expect(network.map((u) => [u.host, u.allowed, u.connections, u.reason])).toEqual([
      ['asked.test', false, 1, 'HOST_DENIED'],
      ['asked.test', true, 1, undefined],
    ])
  })

  it('"always" lets every later connection to the host through without asking', async () => {
    hits.length = 0
    const { output, network, f } = await run(
      `for i in 1 2 3; do curl -sS --cacert cert.pem https://asked.test:${httpsPort}/a$i; done`,
      policy(REGISTRY, 'ask'),
      () => 'always',
    )
    expect(output).toContain('tls hello /a1\ntls hello /a2\ntls hello /a3\n')
    expect(f.requested().map((r) => r.patterns)).toEqual([['asked.test']])
    expect(network.map(shape)).toEqual([
      { host: 'asked.test', port: httpsPort, allowed: true, connections: 3, bytesIn: true, bytesOut: true },
    ])
  })

  it('an asked host still gets the address check: allowed by a person, it resolves to loopback and is refused', async () => {
    hits.length = 0
    const { network, f } = await run(`curl -sS http://sneaky.test:${httpPort}/x`, policy(REGISTRY, 'ask'), () => 'once')
    expect(f.requested().map((r) => r.patterns)).toEqual([['sneaky.test']])
    expect(hits).toEqual([])
    expect(network.map((u) => [u.host, u.allowed, u.reason])).toEqual([['sneaky.test', false, 'ADDRESS_REFUSED']])
  })
})

describe('the network by host: the launcher', () => {
  it.each([
    ['perl', {}],
    ['node alone', { perl: null }],
  ] as const)('with %s, leaves the command neither the listener nor the channel it went over', async (_, launcher) => {
    // past stdin, stdout and stderr (the tool's pipes are sockets too)
    const { output } = await run(
      'for fd in /proc/$$/fd/*; do [ ${fd##*/} -gt 2 ] && readlink $fd; done | grep -c socket; echo "channel ${NODE_CHANNEL_FD-none}"',
      policy(REGISTRY),
      undefined,
      launcher,
    )
    expect(output).toMatch(/^0\nchannel none\n/)
  })

  it('passes on the exit code', async () => {
    writeFileSync(join(workspace, 'exit.sh'), 'exit 3\n')
    const { output } = await run('sh exit.sh', policy(REGISTRY))
    expect(output).toContain('exit code: 3')
  })

  it('works without perl too: node binds the port, hands it over, then starts the command and ends with its code', async () => {
    hits.length = 0
    const { output, network } = await run(
      `curl -sS http://registry.test:${httpPort}/no-perl; exit 4`,
      policy(REGISTRY),
      undefined,
      { perl: null },
    )
    expect(output).toContain('plain hello /no-perl\n')
    expect(output).toContain('exit code: 4')
    expect(network.map((u) => [u.host, u.allowed, u.connections])).toEqual([['registry.test', true, 1]])
  })

  it('with perl, the command starts before the proxy has the listener: its first connection waits in the backlog', async () => {
    hits.length = 0
    // curl is the first thing the shell runs, within a few ms of the launcher's exec
    const { output } = await run(`curl -sS http://registry.test:${httpPort}/at-once`, policy(REGISTRY))
    expect(output).toContain('plain hello /at-once\n')
    expect(hits).toEqual(['http /at-once'])
  })
})

describe('the network by host: a request nobody answers', () => {
  it('is closed when the command that needed it ends, so the session does not stay waiting', async () => {
    const dataDir = join(temp.dir, 'data-abandon')
    const h = harness({
      model: createScriptedModel({
        steps: [
          {
            when: { afterToolResult: false },
            toolCalls: [
              {
                name: 'bash',
                input: { command: `curl -sS --max-time 1 http://asked.test:${httpPort}/; echo gave up` },
              },
            ],
          },
          { when: { afterToolResult: true }, text: 'done' },
        ],
      }),
      directory: workspace,
      tools: [
        createBashTool({
          dataDir,
          sandbox: bwrapSandbox({ hidden: [dataDir] }),
          env: { PATH: process.env.PATH, HOME: temp.dir },
          network: policy(REGISTRY, 'ask'),
        }),
      ],
      agents: [{ name: 'build', rules: [{ permission: 'bash', pattern: '*', action: 'allow' as const }] }],
    })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('fetch') })
    await h.runtime.idle(id)

    const events = h.store.readSession(id)
    const permissions = events.filter((e) => e.type.startsWith('permission.'))
    expect(permissions.map((e) => [e.type, e.meta?.actor])).toEqual([
      ['permission.requested', 'tool'],
      ['permission.replied', 'runtime'],
    ])
    expect(
      events.flatMap((e) => (e.type === 'tool.network' ? [[e.data.host, e.data.allowed, e.data.reason]] : [])),
    ).toEqual([['asked.test', false, 'HOST_DENIED']])
    expect(events.some((e) => e.type === 'tool.completed')).toBe(true)
    expect(getSession(h.store, id)).toMatchObject({ status: 'idle', pendingPermissions: [] })
    await h.runtime.stop()
  })
})

describe('the network by host: on the record', () => {
  it('a run through the real runtime logs one tool.network per host before tool.completed, folded into the part, audit clean', async () => {
    hits.length = 0
    const dataDir = join(temp.dir, 'data-runtime')
    const command = `curl -sS http://registry.test:${httpPort}/r1; curl -sS http://registry.test:${httpPort}/r2; curl -sS http://elsewhere.test:${httpPort}/`
    const h = harness({
      model: createScriptedModel({
        steps: [
          { when: { afterToolResult: false }, toolCalls: [{ name: 'bash', input: { command } }] },
          { when: { afterToolResult: true }, text: 'done' },
        ],
      }),
      directory: workspace,
      tools: [
        createBashTool({
          dataDir,
          sandbox: bwrapSandbox({ hidden: [dataDir] }),
          env: { PATH: process.env.PATH, HOME: temp.dir },
          network: policy(REGISTRY),
        }),
      ],
      agents: [{ name: 'build', rules: [{ permission: 'bash', pattern: '*', action: 'allow' as const }] }],
    })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('fetch') })
    await h.runtime.idle(id)

    const events = h.store.readSession(id)
    const tooling = events.filter((e) => e.type.startsWith('tool.') && e.type !== 'tool.progressed')
    expect(tooling.map((e) => e.type).filter((t) => !t.startsWith('tool.input'))).toEqual([
      'tool.called',
      'tool.network',
      'tool.network',
      'tool.completed',
    ])
    const logged = events.flatMap((e) => (e.type === 'tool.network' ? [e.data] : []))
    expect(logged.map((d) => [d.host, d.port, d.allowed, d.connections, d.reason])).toEqual([
      ['registry.test', httpPort, true, 2, undefined],
      ['elsewhere.test', httpPort, false, 1, 'HOST_NOT_LISTED'],
    ])
    expect(logged[0]?.bytesIn).toBeGreaterThan(0)
    const part = getParts(h.store, id).find((p) => p.type === 'tool')
    expect(part?.type === 'tool' && part.network).toEqual(logged.map(({ partId: _, ...use }) => use))
    expect(hits).toEqual(['http /r1', 'http /r2'])

    const report = await audit(sqlitePorts(h.store), [id])
    expect(report.mismatches).toEqual([])
    await h.runtime.stop()
  })
})
