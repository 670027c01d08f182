import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { VpcLeaseError } from '../../shared/errors.js';

const run = promisify(execFile);

/**
 * The host side of simulated nodes: a veth pair per simulated ENI whose master end carries the ENI's MAC (the
 * plugin finds its ENI by MAC, never by name, exactly as on EC2), and a network namespace per pod. Every
 * name made here starts with this run's id, is recorded the moment it exists, and `cleanup()` deletes all of
 * them — also from signal handlers and after failures, so nothing outlives the run.
 */
export type PodLinkKind = 'ipvlan' | 'macvlan';

export interface HostNetCapability {
  readonly ok: boolean;
  /** Why the datapath cannot run here (not root, no iproute2…). */
  readonly reason?: string;
}

export function probeHostNet(): HostNetCapability {
  if (process.getuid?.() !== 0)
    return { ok: false, reason: 'not running as root: network namespaces and links need CAP_NET_ADMIN' };
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
  } catch {
    return { ok: false, reason: 'iproute2 (`ip`) is missing or cannot list network namespaces' };
  }
  return { ok: true };
}

/** The run is stopping: no namespace, link or plugin call may start any more. */
export class HostNetClosedError extends VpcLeaseError {
  constructor() {
    super('the run is stopping: no new namespaces, links or plugin calls');
  }
}

/**
 * The reaper: a plain node process (no tsx, no project code) that outlives this one if it is killed outright —
 * tsx's CLI SIGKILLs its child when the child does not acknowledge a relayed Ctrl-C within 30 ms, which a busy
 * event loop on a small machine can miss. It polls this process; once it is gone (and its commands in flight
 * have had a second), it deletes every name listed in the file. A normal cleanup removes the file, and the
 * reaper exits.
 */
const REAPER_SCRIPT = `
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const pid = Number(process.env.VPC_LEASE_REAP_PID);
const file = process.env.VPC_LEASE_REAP_FILE;
const alive = () => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
const reap = () => {
  let names = { namespaces: [], links: [] };
  try { names = JSON.parse(fs.readFileSync(file, 'utf8')); } catch {}
  for (const p of names.pids || []) { try { process.kill(p, 'SIGKILL'); } catch {} }
  for (const n of names.namespaces) { try { execFileSync('ip', ['netns', 'del', n], { stdio: 'ignore' }); } catch {} }
  for (const l of names.links) { try { execFileSync('ip', ['link', 'del', l], { stdio: 'ignore' }); } catch {} }
  fs.rmSync(file, { force: true });
};
const timer = setInterval(() => {
  if (!fs.existsSync(file)) process.exit(0);
  if (alive()) return;
  clearInterval(timer);
  setTimeout(() => { reap(); process.exit(0); }, 1000);
}, 200);
`;

/** Longest wait for commands in flight when stopping (an `ip` call or a CNI process takes milliseconds). */
const SHUTDOWN_WAIT_MS = 10_000;

export class HostNet {
  /** Short (link names are at most 15 bytes): `vlh` + 4 hex + counter. */
  readonly runId = randomBytes(2).toString('hex');
  private readonly links = new Map<string, string>(); // ENI id → master link name
  private readonly namespaces = new Set<string>();
  private counter = 0;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;
  private reaperFile: string | undefined;
  linkKind: PodLinkKind = 'macvlan';

  /** Starts the reaper (see REAPER_SCRIPT) with its list in `dir`; call before making anything. */
  startReaper(dir: string): void {
    if (this.reaperFile) return;
    this.reaperFile = join(dir, `hostnet-${this.runId}.json`);
    this.persist();
    const reaper = spawn(process.execPath, ['-e', REAPER_SCRIPT], {
      detached: true,
      stdio: 'ignore',
      env: {
        PATH: process.env['PATH'] ?? '',
        VPC_LEASE_REAP_PID: String(process.pid),
        VPC_LEASE_REAP_FILE: this.reaperFile,
      },
    });
    reaper.unref();
  }

  /** Writes the names that exist (or are being made) for the reaper; synchronous so no update is lost. */
  private persist(): void {
    if (!this.reaperFile) return;
    const names = {
      namespaces: [...this.namespaces],
      links: [...this.links.values(), ...this.scratch],
      pids: [...this.processes],
    };
    writeFileSync(this.reaperFile, JSON.stringify(names));
  }

  private readonly scratch = new Set<string>();
  private readonly processes = new Set<number>();

  /** A process of the run (a node's agent): killed with the namespaces, by cleanup() or by the reaper. */
  adoptProcess(pid: number): void {
    this.processes.add(pid);
    this.persist();
  }

  /** The process ended on its own (a stopped agent): nothing to kill any more. */
  releaseProcess(pid: number): void {
    this.processes.delete(pid);
    this.persist();
  }

  /**
   * Runs `work` (an `ip` command, a plugin process) as one the shutdown waits for: a command still running
   * when the namespaces are deleted would create its namespace or link afterwards, and leak it.
   */
  track<T>(work: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new HostNetClosedError());
    const p = work();
    this.inFlight.add(p);
    const forget = (): void => {
      this.inFlight.delete(p);
    };
    p.then(forget, forget);
    return p;
  }

  /** Stops new work, waits for what is in flight, then removes everything (see cleanup). */
  async shutdown(): Promise<{ links: number; namespaces: number }> {
    this.closed = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inFlight]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, SHUTDOWN_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    return this.cleanup();
  }

  /**
   * Whether this kernel can make ipvlan links: tries one on a scratch veth. The machine this project grew on
   * has no ipvlan module; macvlan then stands in for the pod link kind only (same netlink path, same MAC-based
   * master lookup), through the plugin's test-only switch.
   */
  async detectLinkKind(): Promise<PodLinkKind> {
    const a = `vlx${this.runId}a`;
    const b = `vlx${this.runId}b`;
    this.scratch.add(a);
    this.persist();
    try {
      await run('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
      try {
        await run('ip', ['link', 'add', `vlx${this.runId}i`, 'link', a, 'type', 'ipvlan', 'mode', 'l2']);
        this.linkKind = 'ipvlan';
      } catch {
        this.linkKind = 'macvlan';
      }
    } finally {
      await run('ip', ['link', 'del', a]).catch(() => undefined); // takes its peer and any slave with it
      this.scratch.delete(a);
      this.persist();
    }
    return this.linkKind;
  }

  /**
   * The host interface of an ENI, created once: a veth whose master end has the ENI's MAC and arrives as EC2
   * hot-plugs an ENI (down, no address, MTU 1500: the plugin brings it up); the peer, the VPC's side, is up.
   */
  async ensureEniLink(eniId: string, mac: string): Promise<string> {
    const existing = this.links.get(eniId);
    if (existing) return existing;
    if (this.closed) throw new HostNetClosedError();
    this.counter += 1;
    const n = this.counter;
    const master = `vlh${this.runId}${n}`;
    const peer = `vlp${this.runId}${n}`;
    // Recorded before it exists: a cleanup racing the creation still knows the name.
    this.links.set(eniId, master);
    this.persist();
    await this.track(() => run('ip', ['link', 'add', master, 'type', 'veth', 'peer', 'name', peer]));
    await this.track(() => run('ip', ['link', 'set', master, 'address', mac]));
    await this.track(() => run('ip', ['link', 'set', peer, 'mtu', '9001', 'up']));
    return master;
  }

  async removeEniLink(eniId: string): Promise<void> {
    const master = this.links.get(eniId);
    if (!master) return;
    this.links.delete(eniId);
    await run('ip', ['link', 'del', master]).catch(() => undefined);
    this.persist();
  }

  async addNetns(): Promise<string> {
    if (this.closed) throw new HostNetClosedError();
    this.counter += 1;
    const name = `vlns-${this.runId}-${this.counter}`;
    this.namespaces.add(name);
    this.persist();
    await this.track(() => run('ip', ['netns', 'add', name]));
    return `/var/run/netns/${name}`;
  }

  async removeNetns(path: string): Promise<void> {
    const name = path.split('/').pop() ?? '';
    if (!this.namespaces.delete(name)) return;
    await run('ip', ['netns', 'del', name]).catch(() => undefined);
    this.persist();
  }

  /** `ip -j addr` inside a pod's namespace: the IPv4 addresses on `ifName`. */
  async podAddresses(netnsPath: string, ifName: string): Promise<string[]> {
    const name = netnsPath.split('/').pop() ?? '';
    const { stdout } = await run('ip', ['-n', name, '-j', 'addr', 'show', 'dev', ifName]);
    const links = JSON.parse(stdout || '[]') as { addr_info?: { family: string; local: string }[] }[];
    return links.flatMap((l) => (l.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => a.local));
  }

  get counts(): { links: number; namespaces: number } {
    return { links: this.links.size, namespaces: this.namespaces.size };
  }

  /**
   * Deletes every namespace and link this run made. Synchronous on purpose: it also runs from `exit` and
   * signal handlers, where a pending promise would never settle.
   */
  cleanup(): { links: number; namespaces: number } {
    this.closed = true;
    const removed = { links: 0, namespaces: 0 };
    // Agents first: one still serving a call would use a namespace or link while it goes.
    for (const pid of this.processes) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    this.processes.clear();
    for (const name of [...this.namespaces]) {
      try {
        execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
        removed.namespaces += 1;
      } catch {
        // already gone
      }
      this.namespaces.delete(name);
    }
    for (const [eniId, master] of [...this.links]) {
      try {
        execFileSync('ip', ['link', 'del', master], { stdio: 'ignore' });
        removed.links += 1;
      } catch {
        // already gone
      }
      this.links.delete(eniId);
    }
    // Everything is gone: the reaper sees its file disappear and exits.
    if (this.reaperFile) rmSync(this.reaperFile, { force: true });
    return removed;
  }
}
