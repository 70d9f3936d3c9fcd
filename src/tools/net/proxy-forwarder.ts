import { existsSync } from 'node:fs'

/**
 * How a confined command reaches the sandbox's proxy (docs/SECURITY.md "The
 * network by host"). The command has its own network namespace with nothing
 * in it but loopback, and the proxy's unix socket bound in at PROXY_SOCKET.
 * Proxy variables can only name a TCP address, so a forwarder inside the
 * namespace listens on 127.0.0.1 (a free port of the namespace's own
 * loopback) and passes each connection to the unix socket; the command gets
 * HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and their lower-case forms, which curl
 * reads) naming it, and NODE_USE_ENV_PROXY=1 (Node 22.21 and later then send
 * fetch and http through them too).
 *
 * Node takes tens of milliseconds to start, so where perl is there (it is on
 * nearly every Linux) a few lines of it bind the port first, start the
 * forwarder (the server's own node, listening on that socket) in the
 * background, and exec the command at once: a connection the command opens
 * before node is up waits in the socket's backlog, not refused. The command
 * is the namespace's main process, so the forwarder ends with it. Without
 * perl, node binds the port itself and only then starts the command, at the
 * cost of node's start-up. Either way the forwarder holds no privilege: a
 * command that kills it, or speaks to the socket itself, meets the same
 * proxy, which decides everything.
 */

/** Where the proxy's socket is bound inside the sandbox (under its empty /run). */
export const PROXY_SOCKET = '/run/chronicle-proxy.sock'

const PROXY_ENV = `{
  HTTP_PROXY: url, http_proxy: url, HTTPS_PROXY: url, https_proxy: url,
  NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1', NODE_USE_ENV_PROXY: '1',
}`

/** node: forward each connection to the unix socket */
const PIPE = `const pipe = (inside) => {
  const out = net.connect(socket)
  inside.pipe(out).pipe(inside)
  inside.on('error', () => out.destroy())
  out.on('error', () => inside.destroy())
}`

/** perl: bind, start node on the listening socket in the background (its stdio closed), exec the command. */
const LAUNCHER = `BEGIN { $^F = 1023 }
use strict;
use Socket qw(PF_INET SOCK_STREAM INADDR_LOOPBACK pack_sockaddr_in unpack_sockaddr_in);
my ($node, $forwarder, $socket, @command) = @ARGV;
socket(my $listener, PF_INET, SOCK_STREAM, 0) or die "chronicle proxy forwarder: $!\\n";
bind($listener, pack_sockaddr_in(0, INADDR_LOOPBACK)) or die "chronicle proxy forwarder: $!\\n";
listen($listener, 511) or die "chronicle proxy forwarder: $!\\n";
my ($port) = unpack_sockaddr_in(getsockname($listener));
my $url = "http://127.0.0.1:$port";
$ENV{$_} = $url for qw(HTTP_PROXY http_proxy HTTPS_PROXY https_proxy);
$ENV{$_} = 'localhost,127.0.0.1,::1' for qw(NO_PROXY no_proxy);
$ENV{NODE_USE_ENV_PROXY} = '1';
my $pid = fork() // die "chronicle proxy forwarder: $!\\n";
if ($pid == 0) {
  open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
  exec { $node } $node, '-e', $forwarder, '--', $socket, fileno($listener);
  exit 127;
}
close $listener;
exec { $command[0] } @command or do { print STDERR "$command[0]: $!\\n"; exit 127 };
`

/** node, started by LAUNCHER: accepts on the inherited listening socket */
const ON_FD = `'use strict'
const net = require('node:net')
const [socket, fd] = process.argv.slice(1)
${PIPE}
net.createServer(pipe).listen({ fd: Number(fd) })
`

/** node alone: listens, then starts the command and ends as it does */
const SPAWNING = `'use strict'
const net = require('node:net')
const { spawn } = require('node:child_process')
const [socket, file, ...args] = process.argv.slice(1)
${PIPE}
const server = net.createServer(pipe)
server.listen(0, '127.0.0.1', () => {
  const url = 'http://127.0.0.1:' + server.address().port
  const child = spawn(file, args, { stdio: 'inherit', env: Object.assign({}, process.env, ${PROXY_ENV}) })
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal))
  child.on('error', (err) => { process.stderr.write(file + ': ' + err.message + '\\n'); process.exit(127) })
  child.on('exit', (code, signal) => {
    if (signal === null) process.exit(code)
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
  })
})
`

/** The perl on this machine, if any (the sandbox sees the same root). */
export const SYSTEM_PERL = ['/usr/bin/perl', '/bin/perl'].find((p) => existsSync(p)) ?? null

/**
 * `argv` started with the forwarder in front: by perl when there is one (`perl`: its path, null for node
 * alone), with `node` (the server's own executable, visible read-only in the sandbox) forwarding.
 */
export function forwarderArgv(
  argv: readonly string[],
  options: { readonly perl?: string | null; readonly node?: string } = {},
): string[] {
  const node = options.node ?? process.execPath
  const perl = options.perl === undefined ? SYSTEM_PERL : options.perl
  return perl === null
    ? [node, '-e', SPAWNING, '--', PROXY_SOCKET, ...argv]
    : [perl, '-e', LAUNCHER, '--', node, ON_FD, PROXY_SOCKET, ...argv]
}
