import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toolBinary } from '../../tools/build.js';

/**
 * A standalone kubelet (no API server, no kubeconfig): static pods from a manifest directory, run through the
 * CRI socket of a test runtime. It runs in a private mount namespace so the host keeps its state:
 * - kubelet writes vm.overcommit_memory=1, kernel.panic=10 and kernel.panic_on_oops=1 when they differ (no flag
 *   turns that off; protectKernelDefaults only turns it into a fatal error), so those three /proc/sys files are
 *   bind mounts of files that already hold kubelet's values;
 * - /var/log is an overlay, since kubelet keeps its /var/log/containers symlinks there (the path is fixed);
 * - the bind mount kubelet makes of its root dir (to share it) stays in the namespace.
 */
const NS_SETUP = [
  'set -e',
  'd=$1; shift',
  'for f in vm/overcommit_memory kernel/panic kernel/panic_on_oops; do',
  '  mount --bind "$d/sysctl/$(basename $f)" "/proc/sys/$f"',
  'done',
  'mount -t overlay overlay -o "lowerdir=/var/log,upperdir=$d/overlay/log-up,workdir=$d/overlay/log-work" /var/log',
  'exec "$@"',
].join('\n');

/** The values kubelet's container manager insists on (pkg/kubelet/cm: setupKernelTunables). */
export const KUBELET_SYSCTLS = { overcommit_memory: '1', panic: '10', panic_on_oops: '1' } as const;

/** The kubelet pinned in test/tools/versions.json, built once per machine (`npm run tools`). */
export function kubeletBinary(): Promise<string> {
  return toolBinary('kubelet', 'kubelet');
}

export interface KubeletOptions {
  /** The built kubelet binary. */
  readonly binary: string;
  /** The runtime's CRI socket (a path; `unix://` is added). */
  readonly criSocket: string;
  readonly maxPods: number;
  readonly nodeName: string;
}

/** What the manifest of one static pod says: a busybox container running `command`. */
export interface StaticPod {
  readonly name: string;
  readonly image: string;
  readonly command: readonly string[];
  readonly hostNetwork?: boolean;
}

/** A TCP port the kernel just handed out: kubelet's server must not collide with another kubelet's 10250. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

export class StandaloneKubelet {
  readonly dir = mkdtempSync(join(tmpdir(), 'vpc-lease-kubelet-'));
  readonly manifestDir = join(this.dir, 'manifests');
  readonly logFile = join(this.dir, 'kubelet.log');
  private logText = '';
  private readonly waiters = new Set<() => void>();
  private child?: ChildProcess;
  private exited?: Promise<number | null>;

  constructor(private readonly options: KubeletOptions) {
    for (const d of ['manifests', 'root', 'pod-logs', 'sysctl', 'overlay/log-up', 'overlay/log-work'])
      mkdirSync(join(this.dir, d), { recursive: true });
    for (const [name, value] of Object.entries(KUBELET_SYSCTLS))
      writeFileSync(join(this.dir, 'sysctl', name), `${value}\n`);
  }

  /** The KubeletConfiguration: standalone, cgroupfs, no QoS cgroups or allocatable enforcement, no swap check. */
  private async config(): Promise<Record<string, unknown>> {
    return {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      staticPodPath: this.manifestDir,
      fileCheckFrequency: '1s',
      maxPods: this.options.maxPods,
      containerRuntimeEndpoint: `unix://${this.options.criSocket}`,
      cgroupDriver: 'cgroupfs',
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      address: '127.0.0.1',
      port: await freePort(),
      readOnlyPort: 0,
      healthzPort: 0,
      authentication: { anonymous: { enabled: false }, webhook: { enabled: false } },
      authorization: { mode: 'AlwaysAllow' },
      podLogsDir: join(this.dir, 'pod-logs'),
      resolvConf: '',
      // A nearly full disk here must not evict the test's pods or delete its imported images.
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '0%', 'imagefs.available': '0%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
    };
  }

  async start(): Promise<void> {
    const configFile = join(this.dir, 'config.json');
    writeFileSync(configFile, JSON.stringify(await this.config(), null, 2));
    const args = [
      '--config',
      configFile,
      '--root-dir',
      join(this.dir, 'root'),
      '--cert-dir',
      join(this.dir, 'pki'),
      '--hostname-override',
      this.options.nodeName,
      // Admission refusals are logged at 2; runtime status and "network not ready" (standalone) at 4, in kubelet.go.
      '--v=2',
      '--vmodule=kubelet=4',
    ];
    const child = spawn(
      'unshare',
      ['--mount', '--propagation', 'private', '--', 'sh', '-c', NS_SETUP, 'sh', this.dir, this.options.binary, ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const file = createWriteStream(this.logFile);
    const onData = (c: Buffer): void => {
      file.write(c);
      this.logText += c.toString('utf8');
      for (const w of this.waiters) w();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    this.exited = new Promise((resolve) =>
      child.on('close', (code) => {
        file.end();
        for (const w of this.waiters) w();
        resolve(code);
      }),
    );
    this.child = child;
  }

  /** Everything kubelet logged so far. */
  get log(): string {
    return this.logText;
  }

  /**
   * Resolves with the first match of `pattern` in the log from character `from` on, as soon as kubelet writes
   * it; rejects when kubelet exits or `timeoutMs` passes first.
   */
  waitForLog(pattern: RegExp, timeoutMs: number, from = 0): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const match = pattern.exec(this.logText.slice(from));
        const code = this.child?.exitCode;
        if (match) done(() => resolve(match));
        else if (code !== null && code !== undefined)
          done(() => reject(new Error(`kubelet exited (${code}) before logging ${pattern}: ${this.tail()}`)));
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`kubelet logged no ${pattern} within ${timeoutMs} ms: ${this.tail()}`))),
        timeoutMs,
      );
      const done = (settle: () => void): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  private tail(): string {
    return this.logText.slice(-3000);
  }

  /** Writes a static pod's manifest through a dot-file and a rename: kubelet skips dot-files and never reads half a file. */
  addStaticPod(pod: StaticPod): void {
    const manifest = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: pod.name, namespace: 'default' },
      spec: {
        hostNetwork: pod.hostNetwork ?? false,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: 'main', image: pod.image, imagePullPolicy: 'Never', command: pod.command }],
      },
    };
    const tmp = join(this.manifestDir, `.${pod.name}.json`);
    writeFileSync(tmp, JSON.stringify(manifest));
    renameSync(tmp, join(this.manifestDir, `${pod.name}.json`));
  }

  removeStaticPod(name: string): void {
    rmSync(join(this.manifestDir, `${name}.json`));
  }

  /** SIGTERM and wait. The pods stay with the runtime, as when kubelet restarts; the runtime fixture removes them. */
  async close(): Promise<void> {
    if (this.child && this.child.exitCode === null) {
      this.child.kill('SIGTERM');
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
