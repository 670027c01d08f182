import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CriRuntime } from './cri-runtime.js';

/**
 * A Kubernetes pod template turned into CRI calls the way kubelet turns it (pkg/kubelet/kuberuntime): the
 * sandbox's namespaces, each container's command, env, security context and mounts, hostPath volumes checked or
 * created by their `type` first. Only the fields the project's manifest uses are understood; any other field
 * throws, so a manifest change this does not carry fails the suite instead of being dropped silently.
 */

/** CRI's NamespaceMode and MountPropagation enums (k8s.io/cri-api runtime/v1), as crictl's JSON takes them. */
const NAMESPACE = { POD: 0, CONTAINER: 1, NODE: 2 } as const;
const PROPAGATION: Record<string, number> = { None: 0, HostToContainer: 1, Bidirectional: 2 };

/** Pod-spec fields that only place the pod (scheduler, admission) or are false: nothing for the runtime. */
const POD_PLACEMENT = ['priorityClassName', 'nodeSelector', 'affinity', 'tolerations'];
const POD_FIELDS = [
  ...POD_PLACEMENT,
  'automountServiceAccountToken',
  'hostNetwork',
  'hostPID',
  'terminationGracePeriodSeconds',
  'initContainers',
  'containers',
  'volumes',
];
/** Probes are kubelet's, not the runtime's: the suite waits on readiness itself (readinessPath). */
const CONTAINER_FIELDS = [
  'name',
  'image',
  'command',
  'args',
  'env',
  'securityContext',
  'resources',
  'volumeMounts',
  'livenessProbe',
  'readinessProbe',
];
const SECURITY_FIELDS = [
  'privileged',
  'readOnlyRootFilesystem',
  'runAsUser',
  'seLinuxOptions',
  'allowPrivilegeEscalation',
  'capabilities',
];
const MOUNT_FIELDS = ['name', 'mountPath', 'readOnly', 'mountPropagation'];

export interface ContainerSpec {
  readonly name: string;
  readonly image: string;
  readonly command?: string[];
  readonly args?: string[];
  readonly env?: {
    name: string;
    value?: string;
    valueFrom?: { configMapKeyRef?: { name: string; key: string } };
  }[];
  readonly securityContext?: {
    privileged?: boolean;
    readOnlyRootFilesystem?: boolean;
    runAsUser?: number;
    seLinuxOptions?: { level?: string; type?: string; user?: string; role?: string };
    allowPrivilegeEscalation?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
  };
  readonly resources?: { limits?: { memory?: string } };
  readonly volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; mountPropagation?: string }[];
  readonly readinessProbe?: { httpGet?: { path: string }; exec?: { command: string[] } };
}

export interface PodSpec {
  readonly hostNetwork?: boolean;
  readonly hostPID?: boolean;
  readonly terminationGracePeriodSeconds?: number;
  readonly automountServiceAccountToken?: boolean;
  readonly initContainers?: ContainerSpec[];
  readonly containers: ContainerSpec[];
  readonly volumes?: { name: string; hostPath?: { path: string; type?: string } }[];
}

/** hostNetwork and hostPID as kubelet maps them; without hostPID each container has its own pid namespace. */
function namespaceOptions(spec: PodSpec): Record<string, number> {
  return {
    network: spec.hostNetwork ? NAMESPACE.NODE : NAMESPACE.POD,
    pid: spec.hostPID ? NAMESPACE.NODE : NAMESPACE.CONTAINER,
    ipc: NAMESPACE.POD,
  };
}

function onlyKnown(what: string, value: object, known: readonly string[]): void {
  const unknown = Object.keys(value).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new Error(`${what}: fields this translation does not carry: ${unknown.join(', ')}`);
}

/** "160Mi" → bytes (the suffixes the manifest may use). */
function bytesOf(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  if (!m) throw new Error(`memory quantity ${quantity}: not understood`);
  return Number(m[1]) * { '': 1, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 }[m[2] ?? '']!;
}

export interface PodOptions {
  readonly name: string;
  readonly namespace: string;
  /** Where CRI writes the containers' logs (`<dir>/<container>/<attempt>.log`). */
  readonly logDir: string;
  /** ConfigMaps by name → data, for env `configMapKeyRef`. */
  readonly configMaps: Record<string, Record<string, string>>;
  /** Env the test adds to every container (test mode: fixture endpoints, the stand-in link kind). */
  readonly extraEnv: Record<string, string>;
}

/** A pod run from a template through CRI: its sandbox, and each container's current id by name. */
export class CriPod {
  readonly ids = new Map<string, string>();
  private readonly attempts = new Map<string, number>();
  /** Polls of container state taken while waiting (reported by the suite). */
  polls = 0;

  private constructor(
    private readonly runtime: CriRuntime,
    readonly spec: PodSpec,
    private readonly options: PodOptions,
    private readonly sandboxFile: string,
    readonly sandboxId: string,
  ) {}

  /**
   * Checks the spec, prepares its hostPath volumes in the runtime's mount namespace (the node's paths), runs the
   * sandbox, then each init container to completion (exit 0, else throws) — the containers themselves are
   * started with `start`.
   */
  static async run(runtime: CriRuntime, spec: PodSpec, options: PodOptions): Promise<CriPod> {
    onlyKnown('pod spec', spec, POD_FIELDS);
    if (spec.automountServiceAccountToken !== false) throw new Error('a service account token would be mounted');
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      onlyKnown(`container ${c.name}`, c, CONTAINER_FIELDS);
      onlyKnown(`container ${c.name} securityContext`, c.securityContext ?? {}, SECURITY_FIELDS);
      for (const m of c.volumeMounts ?? []) onlyKnown(`container ${c.name} mount ${m.name}`, m, MOUNT_FIELDS);
    }
    for (const v of spec.volumes ?? []) {
      onlyKnown(`volume ${v.name}`, v, ['name', 'hostPath']);
      if (!v.hostPath) throw new Error(`volume ${v.name}: only hostPath volumes are carried`);
      await prepareHostPath(runtime, v.hostPath.path, v.hostPath.type ?? '');
    }
    const privileged = [...(spec.initContainers ?? []), ...spec.containers].some((c) => c.securityContext?.privileged);
    const sandbox = {
      metadata: { name: options.name, namespace: options.namespace, uid: `uid-${options.name}`, attempt: 0 },
      log_directory: options.logDir,
      linux: {
        security_context: {
          namespace_options: namespaceOptions(spec),
          privileged,
        },
      },
    };
    const sandboxFile = join(options.logDir, '..', `${options.name}-sandbox.json`);
    writeFileSync(sandboxFile, JSON.stringify(sandbox));
    const run = await runtime.crictl(['runp', sandboxFile]);
    if (run.code !== 0) throw new Error(`crictl runp ${options.name}: ${run.stderr}`);
    const pod = new CriPod(runtime, spec, options, sandboxFile, run.stdout.trim());
    for (const c of spec.initContainers ?? []) {
      const id = await pod.start(c.name);
      const exit = await pod.waitExited(id);
      if (exit.exitCode !== 0) throw new Error(`init container ${c.name} exited ${exit.exitCode}: ${exit.log}`);
    }
    return pod;
  }

  private container(name: string): ContainerSpec {
    const c = [...(this.spec.initContainers ?? []), ...this.spec.containers].find((x) => x.name === name);
    if (!c) throw new Error(`no container ${name}`);
    return c;
  }

  /** The CRI ContainerConfig kubelet would send for `name` at `attempt` (`extra`: env of this attempt only). */
  private config(c: ContainerSpec, attempt: number, extra: Record<string, string>): Record<string, unknown> {
    const volumes = new Map((this.spec.volumes ?? []).map((v) => [v.name, v.hostPath!.path]));
    const env = (c.env ?? []).map((e) => {
      if (e.value !== undefined) return { key: e.name, value: e.value };
      const ref = e.valueFrom?.configMapKeyRef;
      const value = ref ? this.options.configMaps[ref.name]?.[ref.key] : undefined;
      if (value === undefined) throw new Error(`env ${e.name} of ${c.name}: no value (CreateContainerConfigError)`);
      return { key: e.name, value };
    });
    for (const [key, value] of Object.entries({ ...this.options.extraEnv, ...extra })) env.push({ key, value });
    const sc = c.securityContext ?? {};
    return {
      metadata: { name: c.name, attempt },
      image: { image: c.image },
      command: c.command ?? [],
      args: c.args ?? [],
      envs: env,
      log_path: `${c.name}/${attempt}.log`,
      mounts: (c.volumeMounts ?? []).map((m) => {
        const host = volumes.get(m.name);
        if (!host) throw new Error(`mount ${m.name} of ${c.name}: no such volume`);
        const propagation = PROPAGATION[m.mountPropagation ?? 'None'];
        if (propagation === undefined) throw new Error(`mountPropagation ${m.mountPropagation}: not understood`);
        return { container_path: m.mountPath, host_path: host, readonly: m.readOnly ?? false, propagation };
      }),
      linux: {
        ...(c.resources?.limits?.memory
          ? { resources: { memory_limit_in_bytes: bytesOf(c.resources.limits.memory) } }
          : {}),
        security_context: {
          privileged: sc.privileged ?? false,
          readonly_rootfs: sc.readOnlyRootFilesystem ?? false,
          ...(sc.runAsUser !== undefined ? { run_as_user: { value: sc.runAsUser } } : {}),
          no_new_privs: sc.allowPrivilegeEscalation === false,
          ...(sc.capabilities
            ? {
                capabilities: {
                  add_capabilities: sc.capabilities.add ?? [],
                  drop_capabilities: sc.capabilities.drop ?? [],
                },
              }
            : {}),
          ...(sc.seLinuxOptions ? { selinux_options: sc.seLinuxOptions } : {}),
          namespace_options: namespaceOptions(this.spec),
        },
      },
    };
  }

  /** Runs `command` in the container `name` as an exec probe does (crictl exec): its exit code and output. */
  async exec(name: string, command: readonly string[]): Promise<{ code: number; stdout: string }> {
    const id = this.ids.get(name);
    if (!id) throw new Error(`no container ${name} started`);
    const r = await this.runtime.crictl(['exec', id, ...command]);
    return { code: r.code ?? -1, stdout: r.stdout };
  }

  /** Creates and starts `name` (a new attempt each time, as kubelet restarts a container); its id. */
  async start(name: string, extra: Record<string, string> = {}): Promise<string> {
    const attempt = this.attempts.get(name) ?? 0;
    this.attempts.set(name, attempt + 1);
    const file = join(this.options.logDir, '..', `${this.options.name}-${name}-${attempt}.json`);
    writeFileSync(file, JSON.stringify(this.config(this.container(name), attempt, extra)));
    const created = await this.runtime.crictl(['create', this.sandboxId, file, this.sandboxFile]);
    if (created.code !== 0) throw new Error(`crictl create ${name}: ${created.stderr}`);
    const id = created.stdout.trim();
    const started = await this.runtime.crictl(['start', id]);
    if (started.code !== 0) throw new Error(`crictl start ${name}: ${started.stderr}`);
    this.ids.set(name, id);
    return id;
  }

  /** The log file CRI writes for the current attempt of `name` (CRI's format: time, stream, tag, line). */
  logFile(name: string): string {
    return join(this.options.logDir, name, `${(this.attempts.get(name) ?? 1) - 1}.log`);
  }

  /** Stops `name` as kubelet does (SIGTERM, SIGKILL after `timeoutS`) and removes it. */
  async stop(name: string, timeoutS = this.spec.terminationGracePeriodSeconds ?? 30): Promise<void> {
    const id = this.ids.get(name);
    if (!id) return;
    for (const args of [
      ['stop', '-t', String(timeoutS), id],
      ['rm', id],
    ]) {
      const r = await this.runtime.crictl(args);
      if (r.code !== 0) throw new Error(`crictl ${args[0]} ${name}: ${r.stderr}`);
    }
    this.ids.delete(name);
  }

  /** Waits for a container to exit (CRI has no wait call: polled, counted). */
  async waitExited(id: string): Promise<{ exitCode: number; log: string }> {
    for (let i = 0; i < 1200; i++) {
      const r = await this.runtime.crictl(['inspect', '-o', 'json', id]);
      const status = (JSON.parse(r.stdout) as { status: { state: string; exitCode: number; message?: string } }).status;
      if (status.state === 'CONTAINER_EXITED') {
        const logs = await this.runtime.crictl(['logs', id]);
        return { exitCode: status.exitCode, log: `${logs.stdout}${logs.stderr}`.slice(-3000) };
      }
      this.polls += 1;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`container ${id} did not exit within 120 s`);
  }

  /** Stops every container and the sandbox, then removes the sandbox. */
  async remove(): Promise<void> {
    for (const args of [
      ['stopp', this.sandboxId],
      ['rmp', this.sandboxId],
    ])
      await this.runtime.crictl(args);
  }
}

/** What kubelet's hostPath volume plugin does for each `type` before the container is created. */
async function prepareHostPath(runtime: CriRuntime, path: string, type: string): Promise<void> {
  const check: Record<string, string[]> = {
    '': ['true'],
    DirectoryOrCreate: ['mkdir', '-p', path],
    FileOrCreate: ['sh', '-c', 'test -e "$1" || : > "$1"', 'sh', path],
    Directory: ['test', '-d', path],
    File: ['test', '-f', path],
  };
  const argv = check[type];
  if (!argv) throw new Error(`hostPath type ${type}: not carried`);
  const r = await runtime.containerd.inNamespace(argv);
  if (r.code !== 0) throw new Error(`hostPath ${path} (${type}): ${r.stderr || 'check failed'}`);
}
