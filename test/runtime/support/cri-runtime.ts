import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ociImage } from '../../../packaging/image/oci.js';
import { runPluginProcess } from '../../support/plugin-process.js';
import { ensureTool } from '../../tools/build.js';
import { type CtrRun, PrivateContainerd } from './containerd.js';

/**
 * containerd with its CRI plugin on, driven with crictl as kubelet drives it, inside PrivateContainerd's mount
 * namespace: its CNI bin and conf dirs are the fixture's temp dirs, its sandbox (pause) image is a busybox-static
 * `sleep` built here and imported (there is no registry to pull from), and runc is Debian's.
 */
export type CriGeneration = '1.6' | '2.x';

/** Fully qualified, so CRI's reference normalization finds the imported name as is. */
export const PAUSE_IMAGE = 'localhost/vpc-lease-test/pause:1';
/** The namespace CRI keeps its pods and images in. */
const CRI_NAMESPACE = 'k8s.io';
/** What a node's CNI plugins package puts beside ours: CRI sets up `lo` with loopback; the default chain has portmap. */
const CNI_PLUGINS = ['loopback', 'portmap'];

function quote(value: string): string {
  return JSON.stringify(value);
}

/** CRI config for containerd 1.6: config version 2, everything under io.containerd.grpc.v1.cri. */
function config16(dir: string): string[] {
  const cri = '[plugins."io.containerd.grpc.v1.cri"';
  return [
    `${cri}]`,
    `  sandbox_image = ${quote(PAUSE_IMAGE)}`,
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    // Pod netns under the private state dir, not the host's /var/run/netns.
    '  netns_mounts_under_state_dir = true',
    // The sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE this machine may not grant.
    '  restrict_oom_score_adj = true',
    `${cri}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `${cri}.containerd.runtimes.runc.options]`,
    '  BinaryName = "/usr/sbin/runc"',
    // runc's state beside ours, not in the host's /run/containerd/runc.
    `  Root = ${quote(join(dir, 'runc'))}`,
    `${cri}.cni]`,
    `  bin_dir = ${quote(join(dir, 'cni-bin'))}`,
    `  conf_dir = ${quote(join(dir, 'net.d'))}`,
    '  max_conf_num = 1',
  ];
}

/** CRI config for containerd 2.x: config version 3, split into the images, runtime and server plugins. */
function config2x(dir: string, toolDir: string, node: NodeLayout): string[] {
  const images = '[plugins."io.containerd.cri.v1.images"';
  const runtime = '[plugins."io.containerd.cri.v1.runtime"';
  return [
    // NRI listens on a fixed host socket (/var/run/nri/nri.sock) that another containerd may own.
    'disabled_plugins = ["io.containerd.nri.v1.nri"]',
    `${images}]`,
    '  snapshotter = "overlayfs"',
    `${images}.pinned_images]`,
    `  sandbox = ${quote(node.sandboxImage ?? PAUSE_IMAGE)}`,
    ...(node.registryConfigDir ? [`${images}.registry]`, `  config_path = ${quote(node.registryConfigDir)}`] : []),
    `${runtime}]`,
    `  netns_mounts_under_state_dir = ${node.netnsUnderStateDir ?? true}`,
    // kubelet asks -998 for sandboxes; this sandbox may not lower oom_score_adj (runc then fails every create).
    '  restrict_oom_score_adj = true',
    `${runtime}.containerd]`,
    '  default_runtime_name = "runc"',
    `${runtime}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    // Our shim of the same version, not a containerd-shim-runc-v2 that PATH may hold from Debian's 1.6.
    `  runtime_path = ${quote(join(toolDir, 'containerd-shim-runc-v2'))}`,
    `${runtime}.containerd.runtimes.runc.options]`,
    '  BinaryName = "/usr/sbin/runc"',
    `  Root = ${quote(join(dir, 'runc'))}`,
    `${runtime}.cni]`,
    `  bin_dirs = [${quote(join(dir, 'cni-bin'))}]`,
    `  conf_dir = ${quote(join(dir, 'net.d'))}`,
    '  max_conf_num = 1',
    '[plugins."io.containerd.grpc.v1.cri"]',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
  ];
}

/** What `crictl inspectp -o json` reports that the tests read. */
export interface PodInspect {
  readonly status: {
    readonly id: string;
    readonly state: string;
    readonly network?: { readonly ip?: string };
  };
}

/** One condition of `crictl info` (RuntimeReady, NetworkReady). */
export interface RuntimeCondition {
  readonly type: string;
  readonly status: boolean;
  readonly reason?: string;
  readonly message?: string;
}

/**
 * How much of a node the runtime's mount namespace imitates (default: pod netns under the private state dir).
 * `netnsUnderStateDir: false` (2.x only) mounts pods' netns at /var/run/netns as on a node; `nsSetup` prepares
 * that namespace (a node's /run), see PrivateContainerd.
 */
export interface NodeLayout {
  readonly netnsUnderStateDir?: boolean;
  readonly nsSetup?: readonly string[];
  /** A sandbox image pulled from a registry (2.x only); without it the busybox stand-in is built and imported. */
  readonly sandboxImage?: string;
  /** containerd's registry config_path: `<host>/hosts.toml` files, e.g. mirrors on a loopback registry (2.x). */
  readonly registryConfigDir?: string;
}

export class CriRuntime {
  private podCounter = 0;

  private constructor(
    readonly generation: CriGeneration,
    readonly containerd: PrivateContainerd,
    private readonly crictlPath: string,
  ) {}

  /** The CNI bin and conf dirs the CRI plugin reads (host paths). */
  get binDir(): string {
    return this.containerd.binDir;
  }
  get confDir(): string {
    return this.containerd.confDir;
  }

  /**
   * Builds (or finds cached) the pinned tools, starts the runtime with `env` (the CNI plugins it runs inherit
   * it), and imports the pause image. CNI plugins come from `cniPluginDir` (a node's CNI plugins package).
   */
  static async start(
    generation: CriGeneration,
    env: Record<string, string>,
    cniPluginDir = '/usr/lib/cni',
    node: NodeLayout = {},
  ): Promise<CriRuntime> {
    const crictl = join(await ensureTool('crictl'), 'crictl');
    const toolDir = generation === '2.x' ? await ensureTool('containerd') : '/usr/bin';
    const containerd = new PrivateContainerd({
      binDir: toolDir,
      configVersion: generation === '2.x' ? 3 : 2,
      config: (dir) => (generation === '2.x' ? config2x(dir, toolDir, node) : config16(dir)),
      env,
      namespace: CRI_NAMESPACE,
      ...(node.nsSetup ? { nsSetup: node.nsSetup } : {}),
    });
    const runtime = new CriRuntime(generation, containerd, crictl);
    for (const plugin of CNI_PLUGINS) copyFileSync(join(cniPluginDir, plugin), join(containerd.binDir, plugin));
    if (node.sandboxImage) {
      await containerd.start();
      return runtime;
    }
    const pause = ociImage({
      files: [{ path: 'bin/busybox', data: readFileSync('/bin/busybox'), mode: 0o755 }],
      // The sandbox only holds the pod's namespaces; CRI stops it with SIGKILL, so no signal handling is needed.
      entrypoint: ['/bin/busybox', 'sleep', '2147483647'],
      name: PAUSE_IMAGE,
      gzipLevel: 1,
    });
    const tarball = join(containerd.dir, 'pause.tar');
    writeFileSync(tarball, pause.tarball);
    await containerd.start();
    const imported = await containerd.ctr(['images', 'import', tarball]);
    if (imported.code !== 0) throw new Error(`ctr images import: ${imported.stderr}`);
    return runtime;
  }

  /** crictl against this runtime's socket (no /etc/crictl.yaml is read: every endpoint is given). */
  crictl(args: readonly string[]): Promise<CtrRun> {
    const endpoint = `unix://${this.containerd.socket}`;
    return runPluginProcess(
      this.crictlPath,
      ['--runtime-endpoint', endpoint, '--image-endpoint', endpoint, '--timeout', '60s', ...args],
      { PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin', CRI_CONFIG_FILE: '/dev/null' },
      '',
    );
  }

  private async crictlOk(args: readonly string[]): Promise<string> {
    const r = await this.crictl(args);
    if (r.code !== 0) throw new Error(`crictl ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
    return r.stdout.trim();
  }

  /** `crictl runp` of a pod named `name` in `namespace`: the sandbox id (CRI's ADD has run when it returns). */
  async runPod(name: string, namespace: string): Promise<string> {
    const file = join(this.containerd.dir, `pod-${this.podCounter++}.json`);
    writeFileSync(
      file,
      JSON.stringify({
        metadata: { name, namespace, uid: `uid-${name}`, attempt: 0 },
        log_directory: join(this.containerd.dir, 'pod-logs', name),
        linux: {},
      }),
    );
    return this.crictlOk(['runp', file]);
  }

  async inspectPod(id: string): Promise<PodInspect> {
    return JSON.parse(await this.crictlOk(['inspectp', '-o', 'json', id])) as PodInspect;
  }

  /** stopp (CRI's DEL) then rmp, as kubelet removes a pod. */
  async removePod(id: string): Promise<void> {
    await this.crictlOk(['stopp', id]);
    await this.crictlOk(['rmp', id]);
  }

  async pods(): Promise<string[]> {
    return (await this.crictlOk(['pods', '-q'])).split('\n').filter(Boolean);
  }

  /** The runtime's conditions as `crictl info` reports them (kubelet reads the same Status call). */
  async conditions(): Promise<RuntimeCondition[]> {
    const info = JSON.parse(await this.crictlOk(['info', '-o', 'json'])) as {
      status: { conditions: RuntimeCondition[] };
    };
    return info.status.conditions;
  }

  async networkReady(): Promise<RuntimeCondition> {
    const condition = (await this.conditions()).find((c) => c.type === 'NetworkReady');
    if (!condition) throw new Error('crictl info reports no NetworkReady condition');
    return condition;
  }

  /** Stops containerd (pods live on in their shims, as on a node) and starts it again on the same state. */
  async restart(): Promise<void> {
    await this.containerd.stop();
    await this.containerd.start();
  }

  /** Removes every pod through CRI (so each gets its DEL), then stops the runtime and removes its files. */
  async close(): Promise<void> {
    await this.containerd.close(async () => {
      for (const id of await this.pods().catch(() => [])) await this.removePod(id).catch(() => undefined);
    });
  }
}
