import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPluginProcess } from '../../support/plugin-process.js';

/**
 * A private containerd: its own root, state and socket under a temp dir, running in its own mount namespace in
 * which /etc and /opt are overlays (writes land in the temp dir) and /etc/cni/net.d and /opt/cni/bin — the
 * directories containerd's CNI integration reads, with no flag to change them in `ctr` — are bind mounts of
 * temp dirs. The host's /etc, /opt, /var and any other containerd are never touched. Every `ctr` runs in that
 * namespace through nsenter, so the CNI plugins it executes see the same directories.
 */
const NS_SETUP: readonly string[] = [
  'set -e',
  'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/overlay/etc-up,workdir=$1/overlay/etc-work" /etc',
  'mount -t overlay overlay -o "lowerdir=/opt,upperdir=$1/overlay/opt-up,workdir=$1/overlay/opt-work" /opt',
  // libcni's result cache (/var/lib/cni) lands here too.
  'mount -t overlay overlay -o "lowerdir=/var,upperdir=$1/overlay/var-up,workdir=$1/overlay/var-work" /var',
  'mkdir -p /etc/cni/net.d /opt/cni/bin',
  'mount --bind "$1/net.d" /etc/cni/net.d',
  'mount --bind "$1/cni-bin" /opt/cni/bin',
];
const NS_EXEC = 'exec "$2" --config "$1/config.toml"';

/**
 * A node's /run in the runtime's mount namespace: a fresh tmpfs (the host's /run and its netns stay untouched),
 * shared as systemd mounts it, so a pod netns that containerd mounts under /run/netns reaches a container that
 * took /run/netns with HostToContainer. The host's xtables lock is kept: the host network is shared with every
 * other iptables writer on this machine.
 */
export const NODE_RUN = [
  '[ -e /run/xtables.lock ] || : > /run/xtables.lock',
  ': > "$1/xtables.lock"',
  'mount --bind /run/xtables.lock "$1/xtables.lock"',
  // The host's own netns mounts (other suites') leave this namespace: containerd judges a path's propagation by
  // the mount it lies under, and a shadowed one under /run/netns would still count.
  'if mountpoint -q /run/netns; then umount -R -l /run/netns; fi',
  'mount -t tmpfs -o mode=0755 vpc-lease-node-run /run',
  'mount --make-rshared /run',
  ': > /run/xtables.lock',
  'mount --bind "$1/xtables.lock" /run/xtables.lock',
];

export const CTR_NAMESPACE = 'vpc-lease-test';

export interface CtrRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ContainerdOptions {
  /** The directory holding containerd and ctr (default Debian's /usr/bin). */
  readonly binDir?: string;
  /** The config file's version: 2 for containerd 1.x, 3 for 2.x. */
  readonly configVersion?: 2 | 3;
  /** Config after root, state and the sockets (default: CRI disabled, as ctr needs none). */
  readonly config?: (dir: string) => readonly string[];
  /** The daemon's environment beyond PATH: the CNI plugins its CRI plugin runs inherit it. */
  readonly env?: Record<string, string>;
  /** The containerd namespace `ctr` works in. */
  readonly namespace?: string;
  /** Shell lines run in the daemon's mount namespace after the CNI dirs are in place ($1 is `dir`). */
  readonly nsSetup?: readonly string[];
}

export class PrivateContainerd {
  readonly dir = mkdtempSync(join(tmpdir(), 'vpc-lease-containerd-'));
  /** The host side of /etc/cni/net.d and /opt/cni/bin inside the namespace. */
  readonly confDir = join(this.dir, 'net.d');
  readonly binDir = join(this.dir, 'cni-bin');
  readonly socket = join(this.dir, 'containerd.sock');
  /** The host side of libcni's cache (/var/lib/cni inside the namespace): what each attachment was given. */
  readonly cniCacheDir = join(this.dir, 'overlay', 'var-up', 'lib', 'cni');
  private readonly toolDir: string;
  private readonly namespace: string;
  private daemon?: ChildProcess;
  private exited?: Promise<void>;
  private nsPid?: number;

  constructor(private readonly options: ContainerdOptions = {}) {
    this.toolDir = options.binDir ?? '/usr/bin';
    this.namespace = options.namespace ?? CTR_NAMESPACE;
    for (const d of ['etc-up', 'etc-work', 'opt-up', 'opt-work', 'var-up', 'var-work', '../net.d', '../cni-bin'])
      mkdirSync(join(this.dir, 'overlay', d), { recursive: true });
    // Only what ctr needs by default: no CRI (it would read the host's CNI dirs and config of its own).
    const config = options.config?.(this.dir) ?? ['disabled_plugins = ["io.containerd.grpc.v1.cri"]'];
    writeFileSync(
      join(this.dir, 'config.toml'),
      [
        `version = ${options.configVersion ?? 2}`,
        `root = ${JSON.stringify(join(this.dir, 'root'))}`,
        `state = ${JSON.stringify(join(this.dir, 'state'))}`,
        ...config,
        '[grpc]',
        `  address = ${JSON.stringify(this.socket)}`,
        '[ttrpc]',
        `  address = ${JSON.stringify(`${this.socket}.ttrpc`)}`,
      ].join('\n'),
    );
  }

  /** PATH with this containerd's directory first, so it starts its own shims. */
  private path(): string {
    return `${this.toolDir}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
  }

  /**
   * Starts the daemon (again, after stop: same root and state, as a restart on a node) and waits for it. With
   * `joinMountNamespaceOf`, it starts in that process's mount namespace (the node's, kept alive by kubelet)
   * instead of setting up a fresh one: the node's mounts (pods' netns, kubelet's volumes) survive the restart.
   */
  async start(joinMountNamespaceOf?: number): Promise<void> {
    const log = join(this.dir, 'containerd.log');
    const config = join(this.dir, 'config.toml');
    // unshare and nsenter (-m only) exec without forking, so this child's pid is containerd's (and names its mount
    // namespace).
    const argv =
      joinMountNamespaceOf === undefined
        ? [
            'unshare',
            '--mount',
            '--propagation',
            'private',
            '--',
            'sh',
            '-c',
            [...NS_SETUP, ...(this.options.nsSetup ?? []), NS_EXEC].join('\n'),
            'sh',
            this.dir,
            join(this.toolDir, 'containerd'),
          ]
        : [
            'nsenter',
            '-t',
            String(joinMountNamespaceOf),
            '-m',
            '--',
            join(this.toolDir, 'containerd'),
            '--config',
            config,
          ];
    const child = spawn(argv[0]!, argv.slice(1), {
      env: { ...process.env, ...this.options.env, PATH: this.path() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const chunks: Buffer[] = [];
    child.stderr?.on('data', (c: Buffer) => chunks.push(c));
    this.exited = new Promise((resolve) =>
      child.on('exit', () => {
        writeFileSync(log, Buffer.concat(chunks), { flag: 'a' });
        resolve();
      }),
    );
    this.daemon = child;
    this.nsPid = child.pid;
    for (let i = 0; i < 200; i++) {
      if (child.exitCode !== null)
        throw new Error(`containerd exited: ${Buffer.concat(chunks).toString().slice(-2000)}`);
      if (existsSync(this.socket) && (await this.ctr(['version'])).code === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('containerd did not answer within 20 s');
  }

  /** The daemon's pid: its mount namespace is the node's (kubelet joins it there). */
  get pid(): number | undefined {
    return this.nsPid;
  }

  /** SIGTERM and wait: the shims and their containers live on, as when a node restarts containerd. */
  async stop(): Promise<void> {
    if (!this.daemon || this.daemon.exitCode !== null) return;
    this.daemon.kill('SIGTERM');
    await this.exited;
  }

  /** `argv` inside the daemon's mount namespace (what the node's host paths are to the containers it runs). */
  inNamespace(argv: readonly string[]): Promise<CtrRun> {
    if (!this.nsPid) throw new Error('containerd is not started');
    return runPluginProcess('nsenter', ['-t', String(this.nsPid), '-m', '--', ...argv], { PATH: this.path() }, '');
  }

  /** `ctr` against this daemon, inside its mount namespace, with `env` added (CNI plugins inherit it). */
  ctr(args: readonly string[], env: Record<string, string> = {}): Promise<CtrRun> {
    if (!this.nsPid) throw new Error('containerd is not started');
    return runPluginProcess(
      'nsenter',
      [
        '-t',
        String(this.nsPid),
        '-m',
        '--',
        join(this.toolDir, 'ctr'),
        '-a',
        this.socket,
        '-n',
        this.namespace,
        ...args,
      ],
      { PATH: this.path(), ...env },
      '',
    );
  }

  /** Starts `ctr args` and returns the process, for a container that runs while the test does other things. */
  ctrBackground(args: readonly string[], env: Record<string, string> = {}): ChildProcess & { done: Promise<CtrRun> } {
    if (!this.nsPid) throw new Error('containerd is not started');
    const child = spawn(
      'nsenter',
      [
        '-t',
        String(this.nsPid),
        '-m',
        '--',
        join(this.toolDir, 'ctr'),
        '-a',
        this.socket,
        '-n',
        this.namespace,
        ...args,
      ],
      {
        env: { PATH: this.path(), ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    const done = new Promise<CtrRun>((resolve) =>
      child.on('close', (code) =>
        resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }),
      ),
    );
    return Object.assign(child, { done });
  }

  /** Removes every container of the namespace, stops the daemon and ends the shims it started. */
  async close(beforeStop?: () => Promise<void>): Promise<void> {
    if (this.daemon && this.daemon.exitCode === null) {
      await beforeStop?.();
      const tasks = await this.ctr(['tasks', 'ls', '-q']);
      for (const id of tasks.stdout.split('\n').filter(Boolean)) await this.ctr(['tasks', 'rm', '-f', id]);
      const containers = await this.ctr(['containers', 'ls', '-q']);
      for (const id of containers.stdout.split('\n').filter(Boolean)) await this.ctr(['containers', 'rm', id]);
      await this.stop();
    }
    // Shims outlive the daemon by design; ours are the ones serving our socket.
    for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        if (cmd.includes('containerd-shim') && cmd.includes(this.socket)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    try {
      execFileSync('umount', ['-R', join(this.dir, 'state')], { stdio: 'ignore' });
    } catch {
      // nothing mounted there from the host's view
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
