import { constants, existsSync } from 'node:fs'
import { constants as os } from 'node:os'

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
 * Every command of a call with a host list starts through it, whether it
 * uses the network or not, so it is a few lines of perl (on nearly every
 * Linux) that load no module — perl with `use Socket` starts twice as slowly,
 * so the socket constants and addresses are spelled out (Linux's; the stream
 * type is passed in, it differs on MIPS). It binds the port, forks the
 * forwarder, and execs the command at once: a connection the command opens
 * before the forwarder accepts waits in the socket's backlog, not refused.
 * The forwarder is one process that copies with large reads (below; what
 * it costs: docs/SECURITY.md "The network by host"). The command is the
 * namespace's main process, so the forwarder ends
 * with it. Without perl, node (the server's own) binds the port and only
 * then starts the command, at the cost of node's start-up. Either way the
 * forwarder holds no privilege: a command that kills it, or speaks to the
 * socket itself, meets the same proxy, which decides everything.
 */

/** Where the proxy's socket is bound inside the sandbox (under its empty /run). */
export const PROXY_SOCKET = '/run/chronicle-proxy.sock'

const PROXY_ENV = `{
  HTTP_PROXY: url, http_proxy: url, HTTPS_PROXY: url, https_proxy: url,
  NO_PROXY: 'localhost,127.0.0.1,::1', no_proxy: 'localhost,127.0.0.1,::1', NODE_USE_ENV_PROXY: '1',
}`

/**
 * perl: bind 127.0.0.1:0, fork the forwarder (stdio closed, so the command's output ends with the command), exec
 * the command. The listener is close-on-exec (perl's default above fd 2) and closed before the exec: the command
 * does not inherit it. AF_INET = 2, AF_UNIX = 1, F_SETFL = 4, IPPROTO_TCP = 6, TCP_NODELAY = 1 (an answer in two
 * writes must not wait for the client's delayed ACK); a sockaddr_in is family (native u16), port (network u16),
 * address, 8 zero bytes. The forwarder is one process whatever the connections (forking per connection
 * costs milliseconds each on a busy machine): a select loop over non-blocking sockets that reads from one side
 * only while what it read last has been written to the other, so a slow reader holds its sender back and nothing
 * piles up. An end is passed on as a shutdown once what came before it is written; a pair is closed when both
 * ends are through, or at once on an error.
 */
const LAUNCHER = `my ($stream, $nonblock, $again, $path, @command) = @ARGV;
my (%socket, %peer, %buffer, %sent, %ended, %shut);
socket(my $listener, 2, $stream, 0) or die "chronicle proxy forwarder: $!\\n";
bind($listener, pack('S n C4 x8', 2, 0, 127, 0, 0, 1)) or die "chronicle proxy forwarder: $!\\n";
listen($listener, 511) or die "chronicle proxy forwarder: $!\\n";
my $url = 'http://127.0.0.1:' . unpack('x2 n', getsockname($listener));
$ENV{$_} = $url for qw(HTTP_PROXY http_proxy HTTPS_PROXY https_proxy);
$ENV{$_} = 'localhost,127.0.0.1,::1' for qw(NO_PROXY no_proxy);
$ENV{NODE_USE_ENV_PROXY} = '1';
my $pid = fork() // die "chronicle proxy forwarder: $!\\n";
if ($pid == 0) {
  open(STDIN, '<', '/dev/null'); open(STDOUT, '>', '/dev/null'); open(STDERR, '>', '/dev/null');
  forward();
}
close $listener;
exec { $command[0] } @command or do { print STDERR "$command[0]: $!\\n"; exit 127 };

sub forward {
  $SIG{PIPE} = 'IGNORE';
  fcntl($listener, 4, $nonblock);
  my $listening = fileno $listener;
  while (1) {
    my ($rin, $win) = ('', '');
    vec($rin, $listening, 1) = 1;
    for my $fd (keys %socket) {
      vec($rin, $fd, 1) = 1 if !$ended{$fd} && !pending($peer{$fd});
      vec($win, $fd, 1) = 1 if pending($fd);
    }
    next if select(my $rout = $rin, my $wout = $win, undef, undef) <= 0;
    if (vec($rout, $listening, 1)) {
      my $client;
      accept($client, $listener) ? pair($client) : select(undef, undef, undef, 0.05);
    }
    for my $fd (keys %socket) {
      write_out($fd) if $socket{$fd} && vec($wout, $fd, 1);
      read_in($fd) if $socket{$fd} && vec($rout, $fd, 1);
    }
  }
}
sub pair {
  my ($client) = @_;
  socket(my $proxy, 1, $stream, 0) or return;
  connect($proxy, pack('S a*', 1, $path)) or return;
  fcntl($_, 4, $nonblock) for $client, $proxy;
  setsockopt($client, 6, 1, 1);
  my ($c, $p) = (fileno $client, fileno $proxy);
  @socket{$c, $p} = ($client, $proxy);
  @peer{$c, $p} = ($p, $c);
  $buffer{$_} = '', $sent{$_} = $ended{$_} = $shut{$_} = 0 for $c, $p;
}
sub pending { length($buffer{$_[0]}) - $sent{$_[0]} }
sub read_in {
  my ($fd) = @_;
  my $to = $peer{$fd};
  my $n = sysread($socket{$fd}, $buffer{$to}, 1048576);
  $sent{$to} = 0;
  return write_out($to) if $n;
  $buffer{$to} = '';
  if (defined $n) { $ended{$fd} = 1; settle($fd) }
  elsif ($! != $again) { drop($fd) }
}
sub write_out {
  my ($fd) = @_;
  my $n = syswrite($socket{$fd}, $buffer{$fd}, pending($fd), $sent{$fd});
  if (defined $n) { $sent{$fd} += $n; settle($peer{$fd}) }
  elsif ($! != $again) { drop($fd) }
}
sub settle {
  my ($fd) = @_;
  my $to = $peer{$fd};
  return unless $ended{$fd} && !pending($to);
  shutdown($socket{$to}, 1) unless $shut{$to}++;
  drop($fd) if $shut{$fd};
}
sub drop {
  my @pair = ($_[0], $peer{$_[0]});
  for my $gone (@pair) {
    close $socket{$gone};
    delete $_->{$gone} for \\%socket, \\%peer, \\%buffer, \\%sent, \\%ended, \\%shut;
  }
}
`

/** node alone: listens, then starts the command and ends as it does */
const SPAWNING = `'use strict'
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

/** SOCK_STREAM: 2 on MIPS, 1 on every other Linux; O_NONBLOCK and EAGAIN differ by architecture too */
const SOCK_STREAM = process.arch.startsWith('mips') ? '2' : '1'
const O_NONBLOCK = String(constants.O_NONBLOCK)
const EAGAIN = String(os.errno.EAGAIN)

/**
 * `argv` started with the forwarder in front: by perl when there is one (`perl`: its path, null for node
 * alone, `node` the server's own executable, visible read-only in the sandbox).
 */
export function forwarderArgv(
  argv: readonly string[],
  options: { readonly perl?: string | null; readonly node?: string } = {},
): string[] {
  const perl = options.perl === undefined ? SYSTEM_PERL : options.perl
  return perl === null
    ? [options.node ?? process.execPath, '-e', SPAWNING, '--', PROXY_SOCKET, ...argv]
    : [perl, '-e', LAUNCHER, '--', SOCK_STREAM, O_NONBLOCK, EAGAIN, PROXY_SOCKET, ...argv]
}
