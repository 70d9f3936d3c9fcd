import { existsSync } from 'node:fs'

/**
 * How a confined command reaches the sandbox's proxy (docs/SECURITY.md "The
 * network by host"). The command has its own network namespace with nothing
 * in it but loopback. Proxy variables can only name a TCP address, so a
 * launcher inside the namespace binds 127.0.0.1 (a free port of the
 * namespace's own loopback) and hands that listener to the server over the
 * IPC channel the command is spawned with (node's, stdio 'ipc'): the
 * server's proxy accepts the command's connections itself (call-proxy.ts),
 * the way it would on any socket of its own. Nothing inside the sandbox
 * relays a byte: a forwarder there (what this replaced) was one process
 * more copying every byte in and out again, the cost in docs/SECURITY.md. The
 * command gets HTTP_PROXY, HTTPS_PROXY, NO_PROXY (and their lower-case
 * forms, which curl reads) naming the port, and NODE_USE_ENV_PROXY=1 (Node
 * 22.21 and later then send fetch and http through them too).
 *
 * Every command of a call with a host list starts through it, whether it
 * uses the network or not, so it is a few lines of perl (on nearly every
 * Linux) that load no module — perl with `use Socket` starts twice as
 * slowly, so the socket constants and structures are spelled out (Linux's),
 * and the listener goes over with sendmsg(2) called by number, perl having
 * no sendmsg of its own. It binds, hands the listener over, closes its copy
 * and the channel, and execs the command: a connection the command opens
 * before the server accepts waits in the listener's backlog. Where perl is
 * missing, or the architecture's sendmsg number is not known here, node (the
 * server's own) does the same with `process.send` and then starts the
 * command, at the cost of node's start-up. Either way the command holds
 * neither the listener nor the channel, and what it connects to is the
 * proxy, which decides everything.
 */

/**
 * perl: bind 127.0.0.1:0, send the listener over the channel (NODE_CHANNEL_FD) as node's own `process.send(msg,
 * server)` would — one JSON line, the descriptor beside it (SCM_RIGHTS) — close both, exec the command. AF_INET =
 * 2, SOCK_STREAM = 1 (2 on MIPS, which goes node's way), SOL_SOCKET = 1, SCM_RIGHTS = 1; a sockaddr_in is family
 * (native u16), port (network u16), address, 8 zero bytes; a msghdr is name, its length, iov, their count,
 * control, its length, flags (pointers and size_t native: `P` and `L!`); a cmsghdr is its length (size_t), level,
 * type, then the descriptor, padded to a size_t. The listener is close-on-exec (perl's default above fd 2) and
 * closed anyway; the channel is not, so it is closed before the exec.
 */
const PERL_LAUNCHER = `my ($sendmsg, @command) = @ARGV;
socket(my $listener, 2, 1, 0) or die "chronicle proxy launcher: $!\\n";
bind($listener, pack('S n C4 x8', 2, 0, 127, 0, 0, 1)) or die "chronicle proxy launcher: $!\\n";
listen($listener, 511) or die "chronicle proxy launcher: $!\\n";
my $url = 'http://127.0.0.1:' . unpack('x2 n', getsockname($listener));
$ENV{$_} = $url for qw(HTTP_PROXY http_proxy HTTPS_PROXY https_proxy);
$ENV{$_} = 'localhost,127.0.0.1,::1' for qw(NO_PROXY no_proxy);
$ENV{NODE_USE_ENV_PROXY} = '1';
my $channel = delete $ENV{NODE_CHANNEL_FD};
delete $ENV{NODE_CHANNEL_SERIALIZATION_MODE};
die "chronicle proxy launcher: no channel to the server\\n" unless defined $channel && $channel =~ /^\\d+$/;
my $line = qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":"chronicle-proxy"}\\n);
my $iov = pack('P L!', $line, length $line);
my $control = pack('L! i i i x![L!]', length(pack('L! i i', 0, 0, 0)) + 4, 1, 1, fileno $listener);
my $header = pack('P i x![P] P L! P L! i x![P]', undef, 0, $iov, 1, $control, length $control, 0);
syscall($sendmsg + 0, $channel + 0, $header, 0) == length $line or die "chronicle proxy launcher: $!\\n";
close $listener;
open(my $to_server, '<&=', $channel) and close $to_server;
exec { $command[0] } @command or do { print STDERR "$command[0]: $!\\n"; exit 127 };
`

/** node alone: listens, sends the listener, closes its copy and the channel, then starts the command and ends as it does */
const NODE_LAUNCHER = `'use strict'
const net = require('node:net')
const { spawn } = require('node:child_process')
const [file, ...args] = process.argv.slice(1)
const listener = net.createServer()
listener.listen(0, '127.0.0.1', () => {
  const url = 'http://127.0.0.1:' + listener.address().port
  const env = Object.assign({}, process.env, {
    HTTP_PROXY: url, http_proxy: url, HTTPS_PROXY: url, https_proxy: url,
    NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1', NODE_USE_ENV_PROXY: '1',
  })
  delete env.NODE_CHANNEL_FD
  delete env.NODE_CHANNEL_SERIALIZATION_MODE
  process.send('chronicle-proxy', listener, (err) => {
    if (err) { process.stderr.write('chronicle proxy launcher: ' + err.message + '\\n'); process.exit(1) }
    listener.close()
    process.disconnect()
    const child = spawn(file, args, { stdio: 'inherit', env })
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => child.kill(signal))
    child.on('error', (err) => { process.stderr.write(file + ': ' + err.message + '\\n'); process.exit(127) })
    child.on('exit', (code, signal) => {
      if (signal === null) process.exit(code)
      process.removeAllListeners(signal)
      process.kill(process.pid, signal)
    })
  })
})
`

/** The perl on this machine, if any (the sandbox sees the same root). */
export const SYSTEM_PERL = ['/usr/bin/perl', '/bin/perl'].find((p) => existsSync(p)) ?? null

/** sendmsg(2)'s number on the architectures perl hands the listener over on (asm-generic's 211, x86's, arm's) */
const SENDMSG: Readonly<Record<string, number>> = {
  x64: 46,
  ia32: 370,
  arm: 296,
  arm64: 211,
  riscv64: 211,
  loong64: 211,
}

/**
 * `argv` started behind the launcher, which must be spawned with an IPC channel (stdio 'ipc'; its one message
 * carries the listener): perl where there is one and its sendmsg is known (`perl`: its path, null for node alone,
 * `node` the server's own executable, visible read-only in the sandbox).
 */
export function launcherArgv(
  argv: readonly string[],
  options: { readonly perl?: string | null; readonly node?: string } = {},
): string[] {
  const perl = options.perl === undefined ? SYSTEM_PERL : options.perl
  const sendmsg = SENDMSG[process.arch]
  return perl === null || sendmsg === undefined
    ? [options.node ?? process.execPath, '-e', NODE_LAUNCHER, '--', ...argv]
    : [perl, '-e', PERL_LAUNCHER, '--', String(sendmsg), ...argv]
}
