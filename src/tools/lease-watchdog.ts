import { spawn } from 'node:child_process'
import { renameSync, writeFileSync } from 'node:fs'

/**
 * On a cluster (docs/CLUSTER.md "Side effects the database cannot fence"): a
 * tool's process group — or a server's process, an MCP or language server the
 * node started — is killed once its node's lease runs out, even if the node
 * cannot do it itself. A node that is frozen (SIGSTOP, a paused VM) or
 * killed does nothing, while another node resumes its runs.
 *
 * The node rewrites a lease file at every heartbeat with the lease's end, in
 * wall-clock ms. A watchdog for each tool is a process of its own, outside the
 * node and the tool's group. It reads that file ten times a second and kills
 * the group with SIGKILL once the time is past it. It ends when the group
 * does.
 *
 * The watchdog is a few lines of perl with no module but Time::HiRes (whole
 * seconds without it). A system without perl runs tools without one.
 */

const SCRIPT = `
my ($target, $file) = @ARGV;
my $now = eval { require Time::HiRes; \\&Time::HiRes::time } || sub { time };
while (kill 0, $target) {
  my $until = 0;
  if (open my $h, '<', $file) { $until = <$h> // 0; close $h }
  if ($now->() * 1000 > $until) { kill 'KILL', $target; exit 0 }
  select undef, undef, undef, 0.1;
}
`

/**
 * Watches `pid` against the lease in `leaseFile`: its process group (a detached child's, a tool's command) or,
 * with `scope` 'process', the process alone (a server that is no group leader; in the sandbox, its bubblewrap
 * takes what runs inside along).
 */
export function watchLease(pid: number, leaseFile: string, scope: 'group' | 'process' = 'group'): void {
  const target = scope === 'group' ? -pid : pid // perl's kill takes a negative id for a process group
  const watchdog = spawn('perl', ['-e', SCRIPT, '--', String(target), leaseFile], { detached: true, stdio: 'ignore' })
  watchdog.on('error', () => {}) // no perl: the tool runs without a watchdog (docs/CLUSTER.md)
  watchdog.unref()
}

/** The lease runs until `untilMs` (wall clock): written whole (a rename), so a watchdog never reads half of it. */
export function writeLease(leaseFile: string, untilMs: number): void {
  const partial = `${leaseFile}.${process.pid}.tmp`
  writeFileSync(partial, String(Math.floor(untilMs)), { mode: 0o600 })
  renameSync(partial, leaseFile)
}
