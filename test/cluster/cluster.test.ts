import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSea } from '../../packaging/build.js';
import { writeInstallerImage } from '../../packaging/image/build-image.js';
import type { Lease } from '../../shared/domain/lease.js';
import { parseManifest } from '../infra/support/manifest.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { PrivateHost } from '../node/support/private-host.js';
import { agentCounts } from '../runtime/support/agent-wave.js';
import { LocalRegistry } from '../runtime/support/registry.js';
import { missing } from '../support/capabilities.js';
import { ensureTool, goAvailable, toolDir } from '../tools/build.js';
import { apiServiceIp, ControlPlane } from './support/control-plane.js';
import { polls, until } from './support/daemon.js';
import { BUSYBOX_IMAGE, PAUSE_IMAGE, pushClusterImages, writeRegistryHosts } from './support/images.js';
import { ClusterNode } from './support/node.js';

/**
 * A one-node Kubernetes cluster built from source (test/tools: etcd, the control plane, kubelet, kube-proxy,
 * containerd 2.4), started as hack/local-up-cluster.sh starts one, in a private network namespace standing in
 * for the instance. vpc-lease is installed as an operator installs it: `npm run push-image` into a loopback
 * registry, `npm run -s daemonset -- <digest ref>`, the ConfigMap's values set, `kubectl apply`. The local
 * store, IAM endpoint and IMDS (NodeFixture) play AWS for the instance; the node item's phase is what the
 * control plane's Lambdas would write.
 *
 * Negative controls (VPC_LEASE_CLUSTER_CONTROL=<name> npx vitest run test/cluster; each must fail the test named):
 * - `no-conflist-gate`: the installer writes the conflist at once (--no-wait-ready) → "Node stays NotReady …" fails;
 * - `no-max-pods`: kubelet keeps its default maxPods (110) → "the pod beyond max-pods …" fails, the pod in
 *   ContainerCreating without a lease.
 */
const TOOLS = ['etcd', 'kubernetes', 'kubelet', 'containerd', 'crictl', 'cni-plugins'] as const;
const CONTROL = process.env['VPC_LEASE_CLUSTER_CONTROL'];

function clusterMissing(): string | undefined {
  const base = missing('root', 'netns');
  if (base) return base;
  const absent = ['/usr/sbin/runc', '/bin/busybox', '/usr/bin/skopeo', '/usr/bin/docker-registry', '/usr/bin/openssl']
    .concat(['/usr/bin/gcc'])
    .filter((p) => !existsSync(p));
  const tools = TOOLS.filter((t) => !existsSync(toolDir(t)));
  if (tools.length > 0 && !goAvailable()) absent.push(`go (to build ${tools.join(', ')}; npm run tools)`);
  if (absent.length === 0) return undefined;
  const reason = `not installed: ${absent.join(', ')} (apt: runc busybox-static skopeo docker-registry openssl gcc)`;
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}

const skip = clusterMissing();
const execFileAsync = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..', '..');
const SERVICE_CIDR = '10.96.0.0/12';
/** The instance's primary ENI (device index 0) in the private namespace: kubelet's node IP. */
const NODE_IP = '192.168.77.10';
const NODE_LINK = 'ens5';
/** The control plane's lease cap (the ConfigMap's maxPodsCap): `vpc-lease-cni max-pods` prints it. */
const CAP_PODS = 6;
const NS = 'team-a';

interface Pod {
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  spec: { nodeName?: string };
  status: {
    phase: string;
    podIP?: string;
    conditions?: { type: string; status: string; reason?: string }[];
    containerStatuses?: { name: string; ready: boolean; restartCount: number; state: Record<string, unknown> }[];
    initContainerStatuses?: { name: string; state: Record<string, unknown> }[];
  };
}
interface NodeObject {
  metadata: { name: string };
  status: {
    capacity: Record<string, string>;
    conditions: { type: string; status: string; reason?: string; message?: string; lastHeartbeatTime: string }[];
  };
}
interface K8sEvent {
  reason: string;
  message: string;
  involvedObject: { name: string };
}

describe.skipIf(skip)('Kubernetes (built from source, one node) runs vpc-lease installed from its DaemonSet', () => {
  let work: string;
  let host: PrivateHost | undefined;
  let fixture: NodeFixture;
  let registry: LocalRegistry;
  let cp: ControlPlane;
  let node: ClusterNode;
  let nodeName: string;
  let maxPods: number;
  let imageRef: string;
  /** The objects applied, as the operator edited them. */
  let applied: Record<string, unknown>[];
  /** The installer image archive, as `npm run image` writes it for this machine's CPU. */
  let archive: string;
  const setupMs: Record<string, number> = {};

  const leases = (): Promise<Lease[]> => fixture.store.listLeases(fixture.arn);
  const readyCondition = async () =>
    (await cp.get<NodeObject>(`/api/v1/nodes/${nodeName}`)).status.conditions.find((c) => c.type === 'Ready')!;
  const podsOf = async (ns: string, selector = ''): Promise<Pod[]> =>
    (await cp.get<{ items: Pod[] }>(`/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`))
      .items;
  const context = (): string =>
    `kubelet: ${node?.kubelet.tail(2000)}\nkube-scheduler: ${cp?.daemons.find((d) => d.name === 'kube-scheduler')?.tail(1000)}`;
  const metrics = async (): Promise<string> => (await fetch('http://127.0.0.1:61680/metrics')).text();
  /** podName → address of every CLAIMED lease of the node; a lease claimed twice for one pod fails here. */
  const claimedByPod = async (): Promise<Map<string, string>> => {
    const held = (await leases()).filter((l) => l.state === 'CLAIMED');
    const names = held.map((l) => l.holder?.podName ?? '');
    expect(new Set(names).size).toBe(names.length);
    return new Map(held.map((l) => [l.holder?.podName ?? '', l.ip]));
  };

  beforeAll(async () => {
    let mark = Date.now();
    const phase = (name: string) => {
      setupMs[name] = Date.now() - mark;
      mark = Date.now();
    };
    // Built before entering the private namespace (a first build downloads modules), one at a time: two Go
    // builds at once on two cores take longer than one after the other.
    const bins: Record<string, string> = {};
    for (const t of TOOLS) bins[t] = await ensureTool(t);
    work = mkdtempSync(join(tmpdir(), 'vpc-lease-cluster-'));
    const dist = join(work, 'dist');
    await buildSea(dist, { reuse: true });
    archive = writeInstallerImage(dist, join(work, 'vpc-lease-cni-image.tar'), { gzipLevel: 1 }).path;
    phase('tools and image');

    host = PrivateHost.enter(`vlk-${process.pid}`, { ipForward: true });
    execFileSync('ip', ['link', 'add', NODE_LINK, 'type', 'veth', 'peer', 'name', `${NODE_LINK}-vpc`]);
    execFileSync('ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', NODE_LINK]);
    for (const l of [NODE_LINK, `${NODE_LINK}-vpc`]) execFileSync('ip', ['link', 'set', l, 'up']);
    execFileSync('ip', ['route', 'add', 'default', 'via', '192.168.77.1', 'dev', NODE_LINK, 'onlink']);
    fixture = await NodeFixture.start();
    nodeName = `${fixture.imds.instanceId}.ec2.internal`;
    // What the control plane leased this node: one address per pod the node may run beside the agent.
    await fixture.seed(CAP_PODS - 1, 10);
    registry = new LocalRegistry();
    await registry.start();
    pushClusterImages(registry.host, work);
    // The operator's steps, as the README gives them.
    const pushed = await execFileAsync(
      'npm',
      ['run', '-s', 'push-image', '--', `${registry.host}/vpc-lease/vpc-lease-cni:0.1.0`, '--archive', archive],
      { cwd: ROOT },
    );
    imageRef = pushed.stdout.trim().split('\n').pop()!;
    expect(imageRef).toMatch(/@sha256:[0-9a-f]{64}$/);
    phase('images pushed');

    cp = await ControlPlane.start({
      dir: join(work, 'control-plane'),
      advertiseAddress: NODE_IP,
      serviceCidr: SERVICE_CIDR,
      etcd: join(bins['etcd']!, 'etcd'),
      kubeBin: bins['kubernetes']!,
    });
    phase('control plane');

    const rendered = (await execFileAsync('npm', ['run', '-s', 'daemonset', '--', imageRef], { cwd: ROOT })).stdout;
    applied = operatorEdits(parseManifest(rendered) as unknown as Record<string, unknown>[], fixture);
    const config = JSON.parse(
      (applied.find((o) => o['kind'] === 'ConfigMap') as { data: Record<string, string> }).data['config.json']!,
    ) as Record<string, unknown>;
    // nodeadm's step: kubelet's max-pods from the node's own figure, before kubelet starts.
    const figure = await execFileAsync(join(dist, 'vpc-lease-cni'), ['max-pods', '--config', JSON.stringify(config)], {
      env: fixture.baseEnv(),
    });
    maxPods = Number(figure.stdout.split('\n')[0]);
    expect(maxPods).toBe(CAP_PODS);

    const runtimeEnv = fixture.baseEnv();
    delete runtimeEnv['PATH'];
    node = await ClusterNode.start({
      dir: join(work, 'node'),
      nodeName,
      nodeIp: NODE_IP,
      providerId: `aws:///us-east-1a/${fixture.imds.instanceId}`,
      runtimeEnv,
      cniPluginDir: bins['cni-plugins']!,
      kubeBin: bins['kubernetes']!,
      kubelet: join(bins['kubelet']!, 'kubelet'),
      kubeletKubeconfig: cp.kubeletKubeconfig(nodeName),
      kubeProxyKubeconfig: cp.kubeProxyKubeconfig(),
      caCert: cp.pki.caCert,
      maxPods: CONTROL === 'no-max-pods' ? 110 : maxPods,
      clusterCidr: '10.77.0.0/24',
      sandboxImage: PAUSE_IMAGE,
      registryConfigDir: writeRegistryHosts(join(work, 'certs.d'), registry.host),
    });
    await until('the Node registered', () => cp.get<NodeObject>(`/api/v1/nodes/${nodeName}`), {
      context,
      alive: () => node.kubelet.running,
    });
    phase('node registered');
    await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items: applied }));
    await cp.kubectlOk(['create', 'namespace', NS]);
  }, 1_500_000);

  afterAll(async () => {
    process.stderr.write(`cluster setup ms: ${JSON.stringify(setupMs)}\ncluster polls: ${JSON.stringify(polls)}\n`);
    if (process.env['VPC_LEASE_CLUSTER_KEEP']) process.stderr.write(`cluster work dir kept: ${work}\n`);
    await node?.close();
    await cp?.close();
    registry?.close();
    await fixture?.close();
    host?.leave();
    if (work && !process.env['VPC_LEASE_CLUSTER_KEEP']) rmSync(work, { recursive: true, force: true });
  }, 300_000);

  it('the Node stays NotReady until the control plane makes the node READY, then turns Ready by itself', async () => {
    const [agentPod] = await until(
      'the DaemonSet pod on the node',
      async () => {
        const pods = await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni');
        const installer = (p: Pod) => p.status.initContainerStatuses?.[0]?.state ?? {};
        return pods.some((p) => installer(p)['running'] || installer(p)['terminated']) ? pods : undefined;
      },
      { context },
    );
    expect(agentPod?.spec.nodeName).toBe(nodeName);
    // The installer has copied the binaries and now waits for READY: kubelet reports twice more, still NotReady.
    await until('the shim in /opt/cni/bin', async () =>
      (await node.runtime.containerd.inNamespace(['test', '-x', '/opt/cni/bin/vpc-lease-cni'])).code === 0
        ? true
        : undefined,
    );
    // Three status reports after the install (kubelet reports every 2 s): each must still say NotReady.
    const seen = new Set<string>();
    const reported = await until(
      'three node status reports after the install',
      async () => {
        const ready = await readyCondition();
        seen.add(ready.lastHeartbeatTime);
        return ready.status !== 'False' || seen.size > 2 ? ready : undefined;
      },
      { everyMs: 1000 },
    );
    expect(reported.status, `${reported.reason}: ${reported.message}`).toBe('False');
    expect(reported.message).toMatch(/network plugin|cni/i);

    await fixture.setPhase('READY');
    const ready = await until(
      'the Node Ready',
      async () => {
        const c = await readyCondition();
        return c.status === 'True' ? c : undefined;
      },
      { context },
    );
    expect(ready.reason).toBe('KubeletReady');
    await until(
      'the agent Ready',
      async () => {
        const [p] = await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni');
        return p?.status.containerStatuses?.find((c) => c.name === 'agent')?.ready ? true : undefined;
      },
      { context },
    );
  }, 300_000);

  it('a Deployment runs: each pod on a CLAIMED lease of this node held by its namespace/name, every ADD by the agent', async () => {
    const before = agentCounts(await metrics());
    await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify(deployment('web', 3)));
    const pods = await until(
      '3 web pods Running',
      async () => {
        const list = await podsOf(NS, 'app=web');
        return list.length === 3 && list.every((p) => p.status.phase === 'Running' && p.status.podIP)
          ? list
          : undefined;
      },
      { context },
    );
    const all = await leases();
    for (const pod of pods) {
      const held = all.filter((l) => l.state === 'CLAIMED' && l.holder?.podName === pod.metadata.name);
      expect(held.map((l) => l.ip)).toEqual([pod.status.podIP]);
      expect(held[0]?.holder).toMatchObject({ podNamespace: NS, podName: pod.metadata.name, ifName: 'eth0' });
      expect(held[0]?.instanceArn).toBe(fixture.arn);
    }
    const after = agentCounts(await metrics());
    expect(after.agentAdds - before.agentAdds).toBeGreaterThanOrEqual(3);
    expect(after.fallbackAdds).toBe(0);
    expect(after.fallbackDels).toBe(0);
  }, 300_000);

  it("the pod beyond vpc-lease's max-pods stays Pending with the scheduler's Too many pods; the Node's capacity is that figure", async () => {
    // The agent and the 3 web pods are on the node: fill it, then one more.
    const fill = maxPods - 4;
    await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify(deployment('fill', fill)));
    await until(
      `${fill} fill pods Running`,
      async () => {
        const list = await podsOf(NS, 'app=fill');
        return list.length === fill && list.every((p) => p.status.phase === 'Running') ? true : undefined;
      },
      { context },
    );
    await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify(deployment('beyond', 1)));
    // Either the scheduler refuses it, or (kubelet admitting more pods than there are addresses) it lands on the
    // node and waits there for an address that never comes.
    const outcome = await until(
      'the pod beyond refused or bound',
      async () => {
        const events = await cp.get<{ items: K8sEvent[] }>(`/api/v1/namespaces/${NS}/events`);
        const refused = events.items.find(
          (e) => e.reason === 'FailedScheduling' && e.involvedObject.name.startsWith('beyond-'),
        );
        const [pod] = await podsOf(NS, 'app=beyond');
        if (refused) return { refused, pod };
        return pod?.spec.nodeName && pod.status.containerStatuses ? { refused, pod } : undefined;
      },
      { context },
    );
    const waiting = outcome.pod?.status.containerStatuses?.[0]?.state['waiting'] as { reason?: string } | undefined;
    expect(outcome.refused?.message, `the pod beyond is on the node, waiting: ${waiting?.reason}`).toContain(
      'Too many pods',
    );
    const [beyond] = await podsOf(NS, 'app=beyond');
    expect(beyond?.status.phase).toBe('Pending');
    expect(beyond?.spec.nodeName).toBeUndefined();
    expect(beyond?.status.containerStatuses).toBeUndefined();
    const n = await cp.get<NodeObject>(`/api/v1/nodes/${nodeName}`);
    expect(Number(n.status.capacity['pods'])).toBe(maxPods);
    await cp.kubectlOk(['-n', NS, 'delete', 'deployment', 'beyond', 'fill', '--wait=true']);
    await until('the fill pods gone', async () => ((await podsOf(NS, 'app=fill')).length === 0 ? true : undefined));
  }, 300_000);

  it('DRAINING turns the Node NotReady with our reason; READY again turns it Ready', async () => {
    await fixture.setPhase('DRAINING');
    const notReady = await until(
      'the Node NotReady',
      async () => {
        const c = await readyCondition();
        return c.status === 'False' ? c : undefined;
      },
      { context },
    );
    expect(notReady.message).toContain('the node is DRAINING');
    await fixture.setPhase('READY');
    await until('the Node Ready again', async () => ((await readyCondition()).status === 'True' ? true : undefined), {
      context,
    });
  }, 300_000);

  it('from a pod: a ClusterIP Service, a NodePort, the node and the API server’s service address are reachable', async () => {
    await cp.kubectlOk(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'web', namespace: NS },
        spec: { type: 'NodePort', selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] },
      }),
    );
    const svc = await cp.get<{ spec: { clusterIP: string; ports: { nodePort: number }[] } }>(
      `/api/v1/namespaces/${NS}/services/web`,
    );
    const nodePort = svc.spec.ports[0]!.nodePort;
    // Each check writes its line to the termination message, read back from the pod's status.
    const checks = [
      `clusterip=$(wget -q -O /dev/null -T 5 http://${svc.spec.clusterIP}/ && echo ok || echo failed)`,
      `nodeport=$(wget -q -O /dev/null -T 5 http://${NODE_IP}:${nodePort}/ && echo ok || echo failed)`,
      `apiserver=$(nc -w 5 ${apiServiceIp(SERVICE_CIDR)} 443 </dev/null && echo ok || echo failed)`,
      'echo "clusterip=$clusterip nodeport=$nodeport apiserver=$apiserver" > /dev/termination-log',
      'test "$clusterip$nodeport$apiserver" = okokok',
    ].join('; ');
    const client = await until(
      'the Service endpoints and kube-proxy rules',
      async () => {
        await cp.kubectl(['-n', NS, 'delete', 'pod', 'client', '--wait=true', '--ignore-not-found']);
        await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify(clientPod(checks)));
        const done = await until(
          'the client pod finished',
          async () => {
            const [p] = await podsOf(NS, 'app=client');
            return p && (p.status.phase === 'Succeeded' || p.status.phase === 'Failed') ? p : undefined;
          },
          { context },
        );
        // The first run may race kube-proxy's first sync of the new Service: run again, counted in polls.
        return done.status.phase === 'Succeeded' ? done : undefined;
      },
      { timeoutMs: 180_000, context },
    );
    const terminated = client.status.containerStatuses?.[0]?.state['terminated'] as { message?: string };
    expect(terminated.message?.trim()).toBe('clusterip=ok nodeport=ok apiserver=ok');
    await cp.kubectlOk(['-n', NS, 'delete', 'pod', 'client', '--wait=true']);
  }, 300_000);

  for (const restarted of ['kubelet', 'containerd'] as const) {
    it(`${restarted} restarted with pods running: every pod keeps its lease, none lost or claimed twice`, async () => {
      const before = await claimedByPod();
      expect(before.size).toBeGreaterThanOrEqual(3);
      const readySandboxes = async () =>
        (await node.runtime.crictl(['pods', '--state', 'ready', '-q'])).stdout.split('\n').filter(Boolean).sort();
      const sandboxes = await readySandboxes();
      if (restarted === 'kubelet') await node.restartKubelet();
      else await node.restartContainerd();
      await until(
        `the Node Ready after the ${restarted} restart`,
        async () => ((await readyCondition()).status === 'True' ? true : undefined),
        { context },
      );
      // kubelet has synced its pods again: the web pods are still Running, on the same sandboxes and addresses.
      const pods = await until(
        '3 web pods Running',
        async () => {
          const list = await podsOf(NS, 'app=web');
          return list.length === 3 && list.every((p) => p.status.phase === 'Running') ? list : undefined;
        },
        { context },
      );
      expect(await readySandboxes()).toEqual(sandboxes);
      const after = await claimedByPod();
      expect(after).toEqual(before);
      for (const p of pods) expect(after.get(p.metadata.name)).toBe(p.status.podIP);
    }, 300_000);
  }

  it('a rolling update of the DaemonSet image while pods come and go: every pod starts, the new agent is Ready and stays up', async () => {
    const digest = imageRef.slice(imageRef.indexOf('@') + 1);
    const pushed = await execFileAsync(
      'npm',
      ['run', '-s', 'push-image', '--', `${registry.host}/vpc-lease/vpc-lease-cni:0.1.0-b`, '--archive', archive],
      { cwd: ROOT },
    );
    // The second tag is the same image: the registry gives the same digest.
    expect(pushed.stdout.trim().split('\n').pop()).toBe(imageRef);
    const secondRef = `${registry.host}/vpc-lease/vpc-lease-cni:0.1.0-b@${digest}`;
    const [oldAgent] = await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni');
    const rendered = (await execFileAsync('npm', ['run', '-s', 'daemonset', '--', secondRef], { cwd: ROOT })).stdout;
    await cp.kubectlOk(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: operatorEdits(parseManifest(rendered) as unknown as Record<string, unknown>[], fixture),
      }),
    );
    // Churn while the DaemonSet rolls: one web pod deleted at a time, its replacement started by the Deployment.
    let churned = 0;
    const rolled = await until(
      'the rollout done',
      async () => {
        const web = await podsOf(NS, 'app=web');
        const running = web.filter((p) => p.status.phase === 'Running');
        if (running.length === 3 && churned < 6) {
          await cp.kubectlOk(['-n', NS, 'delete', 'pod', running[churned % 3]!.metadata.name, '--wait=false']);
          churned += 1;
        }
        const agents = await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni');
        const fresh = agents.filter((a) => a.metadata.name !== oldAgent!.metadata.name);
        const done = churned >= 3 && agents.length === 1 && fresh.length === 1;
        return done && fresh[0]!.status.containerStatuses?.[0]?.ready ? fresh[0] : undefined;
      },
      { timeoutMs: 240_000, everyMs: 1000, context },
    );
    const web = await until(
      '3 web pods Running after the rollout',
      async () => {
        const list = await podsOf(NS, 'app=web');
        return list.length === 3 && list.every((p) => p.status.phase === 'Running' && p.status.podIP)
          ? list
          : undefined;
      },
      { context },
    );
    const claimed = await claimedByPod();
    for (const p of web) expect(claimed.get(p.metadata.name)).toBe(p.status.podIP);
    // Long enough for liveness to fail three times (3 × 10 s) if the new agent's probe reached nothing. Its
    // restarts are reported, not asserted: the surge agent's metrics listener meets the old agent's port.
    await new Promise((r) => setTimeout(r, 45_000));
    const agent = await until(
      'the new agent Ready',
      async () => {
        const [a] = await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni');
        return a?.status.containerStatuses?.find((c) => c.name === 'agent')?.ready ? a : undefined;
      },
      { context },
    );
    const status = agent.status.containerStatuses?.find((c) => c.name === 'agent');
    const counts = agentCounts(await metrics());
    process.stderr.write(
      `rollout: ${churned} pods churned; new agent ${agent.metadata.name} restarts ${status?.restartCount}, ` +
        `ready ${status?.ready}; its counters ${JSON.stringify(counts)}\n`,
    );
    expect(agent.metadata.name).toBe(rolled.metadata.name);
  }, 400_000);

  it('control: with the agent gone from the node, pods still start and the next agent counts their fallbacks', async () => {
    // The DaemonSet kept off the node: its pod goes, the plugin stays on the host.
    const off = { spec: { template: { spec: { nodeSelector: { 'vpc-lease.test/none': 'none' } } } } };
    await cp.kubectlOk([
      '-n',
      'kube-system',
      'patch',
      'daemonset',
      'vpc-lease-cni',
      '--type=merge',
      '-p',
      JSON.stringify(off),
    ]);
    await until('the agent pod gone', async () =>
      (await podsOf('kube-system', 'app.kubernetes.io/name=vpc-lease-cni')).length === 0 ? true : undefined,
    );
    await cp.kubectlOk(['apply', '-f', '-'], JSON.stringify(deployment('alone', 1)));
    const [alone] = await until(
      'the pod started without an agent',
      async () => {
        const list = await podsOf(NS, 'app=alone');
        return list.length === 1 && list[0]!.status.phase === 'Running' ? list : undefined;
      },
      { context },
    );
    expect((await claimedByPod()).get(alone!.metadata.name)).toBe(alone!.status.podIP);
    const on = [{ op: 'remove', path: '/spec/template/spec/nodeSelector/vpc-lease.test~1none' }];
    await cp.kubectlOk([
      '-n',
      'kube-system',
      'patch',
      'daemonset',
      'vpc-lease-cni',
      '--type=json',
      '-p',
      JSON.stringify(on),
    ]);
    const after = await until(
      'the new agent counts the fallback',
      async () => {
        const c = agentCounts(await metrics());
        return c.fallbackAdds >= 1 ? c : undefined;
      },
      { context },
    );
    process.stderr.write(`agent-away control: counters ${JSON.stringify(after)}\n`);
    expect(after.fallbackAdds).toBeGreaterThanOrEqual(1);
  }, 300_000);
});

/** A Deployment of busybox pods serving HTTP on 8080 in the test namespace. */
function deployment(name: string, replicas: number): Record<string, unknown> {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          terminationGracePeriodSeconds: 1,
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'main',
              image: BUSYBOX_IMAGE,
              command: ['/bin/busybox', 'httpd', '-f', '-p', '8080', '-h', '/'],
            },
          ],
        },
      },
    },
  };
}

/** A pod that runs `script` once (restartPolicy Never) and ends Succeeded or Failed. */
function clientPod(script: string): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'client', namespace: NS, labels: { app: 'client' } },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      containers: [{ name: 'main', image: BUSYBOX_IMAGE, command: ['/bin/busybox', 'sh', '-c', script] }],
    },
  };
}

/**
 * What the operator changes in the rendered manifest: the ConfigMap's values (this store, service range, the
 * node's lease cap) and the one test overlay, listed here: test mode in the DaemonSet's containers, so the node
 * side uses the local IMDS and macvlan for the ipvlan this kernel lacks.
 */
function operatorEdits(objects: Record<string, unknown>[], fixture: NodeFixture): Record<string, unknown>[] {
  const configMap = objects.find((o) => o['kind'] === 'ConfigMap') as { data: Record<string, string> };
  configMap.data['service-cidrs'] = SERVICE_CIDR;
  configMap.data['config.json'] = JSON.stringify({
    ...(JSON.parse(configMap.data['config.json']!) as Record<string, unknown>),
    tableName: fixture.tableName,
    dynamoEndpoint: fixture.iam.endpoint,
    imdsEndpoint: fixture.imds.endpoint,
    maxPodsCap: CAP_PODS,
    reuseWaitMs: 2000,
  });
  const ds = objects.find((o) => o['kind'] === 'DaemonSet') as {
    spec: { template: { spec: { initContainers: Container[]; containers: Container[] } } };
  };
  const env = Object.entries(fixture.baseEnv())
    .filter(([k]) => k !== 'PATH')
    .map(([name, value]) => ({ name, value }));
  for (const c of [...ds.spec.template.spec.initContainers, ...ds.spec.template.spec.containers]) {
    c.env = [...(c.env ?? []), ...env];
    if (CONTROL === 'no-conflist-gate' && c.name === 'install') c.command = [...c.command, '--no-wait-ready'];
  }
  return objects;
}

interface Container {
  name: string;
  command: string[];
  env?: { name: string; value?: string }[];
}
