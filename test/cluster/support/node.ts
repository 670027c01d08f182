import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NODE_RUN } from '../../runtime/support/containerd.js';
import { CriRuntime } from '../../runtime/support/cri-runtime.js';
import { KUBELET_SYSCTLS } from '../../runtime/support/kubelet.js';
import { Daemon, until } from './daemon.js';

export interface ClusterNodeOptions {
  readonly dir: string;
  readonly nodeName: string;
  /** The instance's primary private address: kubelet's --node-ip. */
  readonly nodeIp: string;
  /** `aws:///<az>/<instance id>`, as the AWS cloud provider sets it. */
  readonly providerId: string;
  /** The environment containerd runs CNI plugins with (the node's: test mode, IMDS). */
  readonly runtimeEnv: Record<string, string>;
  readonly cniPluginDir: string;
  readonly kubeBin: string;
  readonly kubelet: string;
  readonly kubeletKubeconfig: string;
  readonly kubeProxyKubeconfig: string;
  readonly caCert: string;
  /** kubelet's maxPods, set in its config file before it starts, as nodeadm does. */
  readonly maxPods: number;
  /** The pod address range kube-proxy masquerades traffic from outside of. */
  readonly clusterCidr: string;
  readonly sandboxImage: string;
  /** `<registry host>/hosts.toml` mirror files for containerd. */
  readonly registryConfigDir: string;
}

/** Where nodeadm writes kubelet's config on EKS AL2023; the installer reads it for its max-pods check. */
export const KUBELET_CONFIG = '/etc/kubernetes/kubelet/config.json';

/**
 * One node: containerd 2.x in its own mount namespace (the node's /etc, /opt, /var, /run), kubelet in API mode in
 * that same namespace (its volume mounts must be the runtime's), and kube-proxy in iptables mode. The network
 * namespace is the caller's (a private one standing in for the instance's).
 */
export class ClusterNode {
  runtime!: CriRuntime;
  kubelet!: Daemon;
  kubeProxy!: Daemon;
  private kubeletArgs: string[] = [];

  private constructor(readonly options: ClusterNodeOptions) {}

  static async start(options: ClusterNodeOptions): Promise<ClusterNode> {
    const node = new ClusterNode(options);
    await node.startRuntime();
    await node.startKubelet();
    node.startKubeProxy();
    return node;
  }

  private async startRuntime(): Promise<void> {
    this.runtime = await CriRuntime.start('2.x', this.options.runtimeEnv, this.options.cniPluginDir, {
      netnsUnderStateDir: false,
      nsSetup: NODE_RUN,
      sandboxImage: this.options.sandboxImage,
      registryConfigDir: this.options.registryConfigDir,
    });
  }

  /** `argv` in the node's mount namespace; fails loudly. */
  async onNode(argv: readonly string[]): Promise<string> {
    const r = await this.runtime.containerd.inNamespace(argv);
    if (r.code !== 0) throw new Error(`${argv.join(' ')} on the node exited ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  private async startKubelet(): Promise<void> {
    const { dir, nodeName, nodeIp } = this.options;
    mkdirSync(join(dir, 'kubelet-sysctl'), { recursive: true });
    for (const [name, value] of Object.entries(KUBELET_SYSCTLS))
      writeFileSync(join(dir, 'kubelet-sysctl', name), `${value}\n`);
    const config = {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      maxPods: this.options.maxPods,
      providerID: this.options.providerId,
      containerRuntimeEndpoint: `unix://${this.runtime.containerd.socket}`,
      // The cgroup settings the standalone suite found: cgroupfs, no QoS cgroups, no allocatable enforcement.
      cgroupDriver: 'cgroupfs',
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: this.options.caCert },
      },
      authorization: { mode: 'Webhook' },
      readOnlyPort: 0,
      resolvConf: '',
      serializeImagePulls: false,
      // Status changes (runtime network readiness) reach the Node object within seconds.
      nodeStatusUpdateFrequency: '2s',
      nodeStatusReportFrequency: '2s',
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '0%', 'imagefs.available': '0%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
    };
    const staged = join(dir, 'kubelet-config.json');
    writeFileSync(staged, JSON.stringify(config, null, 2));
    // kubelet writes three sysctls it insists on; in the node's mount namespace those files are bind mounts of
    // files that already hold its values, so this machine's stay as they are.
    await this.onNode([
      'sh',
      '-c',
      [
        'set -e',
        'mkdir -p /etc/kubernetes/kubelet /etc/eks/kubelet',
        `cp "$1" ${KUBELET_CONFIG}`,
        'for f in vm/overcommit_memory kernel/panic kernel/panic_on_oops; do',
        '  mount --bind "$2/$(basename $f)" "/proc/sys/$f"',
        'done',
      ].join('\n'),
      'sh',
      staged,
      join(dir, 'kubelet-sysctl'),
    ]);
    this.kubeletArgs = [
      this.options.kubelet,
      `--config=${KUBELET_CONFIG}`,
      `--kubeconfig=${this.options.kubeletKubeconfig}`,
      `--hostname-override=${nodeName}`,
      `--node-ip=${nodeIp}`,
      '--v=2',
    ];
    this.spawnKubelet();
  }

  /** kubelet in the node's mount namespace: containerd's (nsenter -m execs kubelet itself, so its pid is kubelet's). */
  private spawnKubelet(): void {
    const argv = ['nsenter', '-t', String(this.runtime.containerd.pid), '-m', '--', ...this.kubeletArgs];
    this.kubelet = new Daemon('kubelet', argv, join(this.options.dir, 'kubelet.log'));
    this.kubelet.start();
  }

  /** Stops kubelet (pods keep running under containerd) and starts it again with the same state. */
  async restartKubelet(): Promise<void> {
    await this.kubelet.stop();
    this.spawnKubelet();
  }

  /**
   * Stops containerd (pods live on in their shims) and starts it again on the same state, in the node's mount
   * namespace, which kubelet holds meanwhile.
   */
  async restartContainerd(): Promise<void> {
    const holder = this.kubelet.pid;
    if (holder === undefined || !this.kubelet.running) throw new Error('kubelet holds the node namespace: not running');
    await this.runtime.containerd.stop();
    await this.runtime.containerd.start(holder);
  }

  private startKubeProxy(): void {
    const { dir, nodeName } = this.options;
    const config = join(dir, 'kube-proxy.json');
    writeFileSync(
      config,
      JSON.stringify({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        kind: 'KubeProxyConfiguration',
        clientConnection: { kubeconfig: this.options.kubeProxyKubeconfig },
        mode: 'iptables',
        hostnameOverride: nodeName,
        clusterCIDR: this.options.clusterCidr,
        // nf_conntrack_max is global, not per network namespace: leave this machine's as it is.
        conntrack: { maxPerCore: 0, min: 0 },
      }),
    );
    this.kubeProxy = new Daemon(
      'kube-proxy',
      [join(this.options.kubeBin, 'kube-proxy'), `--config=${config}`, '--v=2'],
      join(dir, 'kube-proxy.log'),
    );
    this.kubeProxy.start();
  }

  /** kubelet's log since `from` matched by `pattern`, waited for. */
  waitForKubelet(pattern: RegExp, from = 0, timeoutMs = 120_000): Promise<RegExpExecArray> {
    return until(`kubelet logs ${pattern}`, () => pattern.exec(this.kubelet.log.slice(from)) ?? undefined, {
      timeoutMs,
      context: () => this.kubelet.tail(),
    });
  }

  async close(): Promise<void> {
    await this.kubeProxy?.stop();
    await this.kubelet?.stop();
    await this.runtime?.close();
  }
}
