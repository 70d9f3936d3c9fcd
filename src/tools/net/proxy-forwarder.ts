/**
 * How a confined command reaches the sandbox's proxy (docs/SECURITY.md "The
 * network by host"). The command has its own network namespace with nothing
 * in it but loopback, and the proxy's unix socket bound in at PROXY_SOCKET.
 * Proxy variables can only name a TCP address, so the command is started by
 * this small forwarder, run with the server's own node inside the namespace:
 * it listens on 127.0.0.1 (a free port of the namespace's own loopback),
 * passes each connection to the unix socket, and only once it listens starts
 * the command with HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and their lower-case
 * forms, which curl reads) naming it, and NODE_USE_ENV_PROXY=1 (Node 22.21
 * and later then send fetch and http through them too). It ends with the
 * command's own exit code or signal, and passes on the signals a stop sends.
 * The forwarder holds no privilege: a command that kills it or speaks to the
 * socket itself reaches the same proxy, which decides everything.
 */

/** Where the proxy's socket is bound inside the sandbox (under its empty /run). */
export const PROXY_SOCKET = '/run/chronicle-proxy.sock'

const FORWARDER = `'use strict'
const net = require('node:net')
const { spawn } = require('node:child_process')
const [socket, file, ...args] = process.argv.slice(1)
const server = net.createServer((inside) => {
  const out = net.connect(socket)
  inside.pipe(out).pipe(inside)
  inside.on('error', () => out.destroy())
  out.on('error', () => inside.destroy())
})
server.listen(0, '127.0.0.1', () => {
  const url = 'http://127.0.0.1:' + server.address().port
  const local = 'localhost,127.0.0.1,::1'
  const env = Object.assign({}, process.env, {
    HTTP_PROXY: url, http_proxy: url, HTTPS_PROXY: url, https_proxy: url,
    NO_PROXY: local, no_proxy: local, NODE_USE_ENV_PROXY: '1',
  })
  const child = spawn(file, args, { stdio: 'inherit', env })
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal))
  child.on('error', (err) => { process.stderr.write(file + ': ' + err.message + '\\n'); process.exit(127) })
  child.on('exit', (code, signal) => {
    if (signal === null) process.exit(code)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
})
`

/** `argv` started by the forwarder with `node` (the server's own executable, visible read-only in the sandbox). */
export function forwarderArgv(argv: readonly string[], node = process.execPath): string[] {
  return [node, '-e', FORWARDER, '--', PROXY_SOCKET, ...argv]
}
