import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { Daemon, until } from './daemon.js';
import { type CertPair, ClusterPki } from './pki.js';

export interface ControlPlaneOptions {
  /** Where the keys, etcd's data and the logs go. */
  readonly dir: string;
  /** The node's primary address: the API server's advertised address, the `kubernetes` Service's endpoint. */
  readonly advertiseAddress: string;
  readonly serviceCidr: string;
  /** The built etcd and the directory of kube-apiserver, kube-controller-manager, kube-scheduler, kubectl. */
  readonly etcd: string;
  readonly kubeBin: string;
}

export interface KubectlRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The first address of the service range: the `kubernetes` Service's ClusterIP. */
export function apiServiceIp(serviceCidr: string): string {
  const [base] = serviceCidr.split('/');
  const parts = base!.split('.').map(Number);
  parts[3] = parts[3]! + 1;
  return parts.join('.');
}

/**
 * etcd, kube-apiserver, kube-controller-manager and kube-scheduler as hack/local-up-cluster.sh runs them from
 * built binaries: client certificates for every component, a service-account signing key, Node and RBAC
 * authorization, the NodeRestriction admission plugin, every controller.
 */
export class ControlPlane {
  readonly pki: ClusterPki;
  readonly daemons: Daemon[] = [];
  readonly port = 6443;
  readonly server: string;
  readonly adminKubeconfig: string;
  private readonly admin: CertPair;

  private constructor(private readonly options: ControlPlaneOptions) {
    this.pki = new ClusterPki(join(options.dir, 'pki'));
    this.server = `https://${options.advertiseAddress}:${this.port}`;
    this.admin = this.pki.issue({ name: 'admin', cn: 'kubernetes-admin', groups: ['system:masters'] });
    this.adminKubeconfig = this.pki.kubeconfig('admin', this.server, this.admin);
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const cp = new ControlPlane(options);
    await cp.startAll();
    return cp;
  }

  private daemon(name: string, argv: readonly string[]): Daemon {
    const d = new Daemon(name, argv, join(this.options.dir, `${name}.log`));
    d.start();
    this.daemons.push(d);
    return d;
  }

  private async startAll(): Promise<void> {
    const { dir, advertiseAddress, serviceCidr, kubeBin } = this.options;
    const pki = this.pki;
    const etcdClient = 'http://127.0.0.1:2379';
    const etcd = this.daemon('etcd', [
      this.options.etcd,
      '--name=node',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdClient}`,
      `--advertise-client-urls=${etcdClient}`,
      '--listen-peer-urls=http://127.0.0.1:2380',
      '--initial-advertise-peer-urls=http://127.0.0.1:2380',
      '--initial-cluster=node=http://127.0.0.1:2380',
      // One member on a test's temp dir: no fsync wait per write.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    await until('etcd healthy', async () => ((await fetch(`${etcdClient}/health`)).ok ? true : undefined), {
      alive: () => etcd.running,
      context: () => etcd.tail(),
    });

    const serviceIp = apiServiceIp(serviceCidr);
    const serving = pki.issue({
      name: 'apiserver',
      cn: 'kube-apiserver',
      san: [
        `IP:${advertiseAddress}`,
        'IP:127.0.0.1',
        `IP:${serviceIp}`,
        'DNS:kubernetes',
        'DNS:kubernetes.default',
        'DNS:kubernetes.default.svc',
        'DNS:kubernetes.default.svc.cluster.local',
      ],
    });
    const kubeletClient = pki.issue({
      name: 'apiserver-kubelet-client',
      cn: 'kube-apiserver-kubelet-client',
      groups: ['system:masters'],
    });
    const apiserver = this.daemon('kube-apiserver', [
      join(kubeBin, 'kube-apiserver'),
      `--etcd-servers=${etcdClient}`,
      `--advertise-address=${advertiseAddress}`,
      '--bind-address=0.0.0.0',
      `--secure-port=${this.port}`,
      `--tls-cert-file=${serving.cert}`,
      `--tls-private-key-file=${serving.key}`,
      `--client-ca-file=${pki.caCert}`,
      `--kubelet-client-certificate=${kubeletClient.cert}`,
      `--kubelet-client-key=${kubeletClient.key}`,
      '--kubelet-preferred-address-types=InternalIP',
      `--service-account-key-file=${pki.serviceAccountPub}`,
      `--service-account-signing-key-file=${pki.serviceAccountKey}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-cluster-ip-range=${serviceCidr}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction',
      '--allow-privileged=true',
      `--cert-dir=${join(dir, 'apiserver-certs')}`,
    ]);
    await until('kube-apiserver ready', async () => ((await this.raw('/readyz')).status === 200 ? true : undefined), {
      alive: () => apiserver.running,
      context: () => apiserver.tail(),
    });

    const cm = pki.issue({ name: 'controller-manager', cn: 'system:kube-controller-manager' });
    this.daemon('kube-controller-manager', [
      join(kubeBin, 'kube-controller-manager'),
      `--kubeconfig=${pki.kubeconfig('controller-manager', this.server, cm)}`,
      `--authentication-kubeconfig=${pki.kubeconfig('controller-manager', this.server, cm)}`,
      `--authorization-kubeconfig=${pki.kubeconfig('controller-manager', this.server, cm)}`,
      '--controllers=*',
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${pki.serviceAccountKey}`,
      `--root-ca-file=${pki.caCert}`,
      `--cluster-signing-cert-file=${pki.caCert}`,
      `--cluster-signing-key-file=${pki.caKey}`,
      `--service-cluster-ip-range=${serviceCidr}`,
      '--allocate-node-cidrs=false',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--secure-port=10257',
    ]);
    const scheduler = pki.issue({ name: 'scheduler', cn: 'system:kube-scheduler' });
    const schedulerKubeconfig = pki.kubeconfig('scheduler', this.server, scheduler);
    this.daemon('kube-scheduler', [
      join(kubeBin, 'kube-scheduler'),
      `--kubeconfig=${schedulerKubeconfig}`,
      `--authentication-kubeconfig=${schedulerKubeconfig}`,
      `--authorization-kubeconfig=${schedulerKubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--secure-port=10259',
    ]);
    // The default ServiceAccount is what pods run as: the controller manager's serviceaccount controller made it.
    await until('default ServiceAccount', async () =>
      (await this.raw('/api/v1/namespaces/default/serviceaccounts/default')).status === 200 ? true : undefined,
    );
  }

  /** A kubeconfig for a node's kubelet: CN system:node:<name> in system:nodes, what the Node authorizer wants. */
  kubeletKubeconfig(nodeName: string): string {
    const pair = this.pki.issue({
      name: `kubelet-${nodeName}`,
      cn: `system:node:${nodeName}`,
      groups: ['system:nodes'],
    });
    return this.pki.kubeconfig(`kubelet-${nodeName}`, this.server, pair);
  }

  /** kube-proxy's kubeconfig: the user the default system:node-proxier binding names. */
  kubeProxyKubeconfig(): string {
    return this.pki.kubeconfig(
      'kube-proxy',
      this.server,
      this.pki.issue({ name: 'kube-proxy', cn: 'system:kube-proxy' }),
    );
  }

  /** One request to the API server as the admin; `body` is sent as JSON. */
  raw(path: string, method = 'GET', body?: unknown): Promise<{ status: number; text: string }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        `${this.server}${path}`,
        {
          method,
          ca: readFileSync(this.pki.caCert),
          cert: readFileSync(this.admin.cert),
          key: readFileSync(this.admin.key),
          headers: {
            accept: 'application/json',
            ...(payload
              ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }
              : {}),
          },
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
      req.end(payload);
    });
  }

  /** GET `path` as JSON; throws on any status but 200. */
  async get<T>(path: string): Promise<T> {
    const res = await this.raw(path);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.text.slice(0, 500)}`);
    return JSON.parse(res.text) as T;
  }

  /** kubectl as the admin, with `stdin`. */
  kubectl(args: readonly string[], stdin?: string): Promise<KubectlRun> {
    return new Promise((resolve) => {
      const child = execFile(
        join(this.options.kubeBin, 'kubectl'),
        ['--kubeconfig', this.adminKubeconfig, ...args],
        { maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      child.stdin?.end(stdin ?? '');
    });
  }

  /** kubectl that must succeed; its stdout. */
  async kubectlOk(args: readonly string[], stdin?: string): Promise<string> {
    const r = await this.kubectl(args, stdin);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** Stops the components, the newest first (etcd last). */
  async close(): Promise<void> {
    for (const d of [...this.daemons].reverse()) await d.stop();
  }
}
