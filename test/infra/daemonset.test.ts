import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AGENT_CAPABILITIES } from '../../node/agent/capabilities.js';
import { HOST_PROC_SYS_NET } from '../../node/datapath/proc-sys-net.js';
import { SHIM_SOURCE_FILE } from '../../node/installer/install.js';
import { IMAGE_ARCHES } from '../../packaging/image/build-image.js';
import { DAEMONSET_FILE, IMAGE_PLACEHOLDER, renderDaemonSet } from '../../packaging/image/render-daemonset.js';
import { type K8sObject, parseManifest } from './support/manifest.js';

const manifest = readFileSync(DAEMONSET_FILE, 'utf8');
const URI = `123456789012.dkr.ecr.eu-west-1.amazonaws.com/vpc-lease-cni@sha256:${'a'.repeat(64)}`;

interface Container {
  name: string;
  image: unknown;
  command?: string[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; mountPropagation?: string }[];
  livenessProbe?: { httpGet?: unknown; exec?: { command: string[] } };
  readinessProbe?: { httpGet?: unknown; exec?: { command: string[] } };
}
interface PodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  volumes?: { name: string; hostPath?: { path: string } }[];
  priorityClassName?: string;
  nodeSelector?: Record<string, string>;
  affinity?: Record<string, unknown>;
  tolerations?: Record<string, unknown>[];
  initContainers: Container[];
  containers: Container[];
}

function daemonSet(objects: K8sObject[]): {
  spec: { updateStrategy: Record<string, unknown>; template: { spec: PodSpec } };
} {
  const ds = objects.find((o) => o.kind === 'DaemonSet');
  if (!ds) throw new Error('no DaemonSet in the manifest');
  return ds as never;
}

describe('node/deploy/daemonset.yaml, rendered', () => {
  const objects = parseManifest(renderDaemonSet(manifest, URI));
  const ds = daemonSet(objects);
  const pod = ds.spec.template.spec;
  const install = pod.initContainers.find((c) => c.name === 'install')!;

  it('names the DaemonSet and ConfigMap the docs use, in kube-system', () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.namespace}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/kube-system/vpc-lease-cni',
      'DaemonSet/kube-system/vpc-lease-cni',
    ]);
  });

  it('runs the given image as the installer, and names no image nobody publishes', () => {
    expect(install.image).toBe(URI);
    const images = [...pod.initContainers, ...pod.containers].map((c) => c.image);
    expect(images).toEqual([URI, URI]);
    expect(manifest).not.toMatch(/ghcr\.io/);
  });

  it('labels the installer spc_t, without privilege', () => {
    expect(install.securityContext?.['seLinuxOptions']).toEqual({ level: 's0', type: 'spc_t' });
    expect(install.securityContext?.['privileged']).toBeUndefined();
    expect(install.securityContext?.['allowPrivilegeEscalation']).toBe(false);
  });

  it('runs the node agent in place of pause: host network, no host PID, the netns dirs HostToContainer', () => {
    const agent = pod.containers.find((c) => c.name === 'agent')!;
    expect(pod.containers.map((c) => c.name)).toEqual(['agent']);
    expect(agent.command?.slice(0, 2)).toEqual(['/app/vpc-lease-cni', 'agent']);
    expect([pod.hostNetwork, pod.hostPID]).toEqual([true, undefined]);
    const hostPathOf = (name: string) => pod.volumes?.find((v) => v.name === name)?.hostPath?.path;
    const mounts = Object.fromEntries(
      (agent.volumeMounts ?? []).map((m) => [m.mountPath, `${hostPathOf(m.name)} ${m.mountPropagation ?? 'None'}`]),
    );
    expect(mounts).toEqual({
      '/run/vpc-lease': '/run/vpc-lease None',
      '/run/netns': '/run/netns HostToContainer',
      '/var/run/netns': '/var/run/netns HostToContainer',
      '/var/lib/cni/vpc-lease': '/var/lib/cni/vpc-lease None',
      '/var/log/vpc-lease': '/var/log/vpc-lease None',
      '/run/xtables.lock': '/run/xtables.lock None',
      '/host/proc/sys/net': '/proc/sys/net None',
    });
    // The socket's directory is the agent's alone: no other container of this pod mounts it.
    const others = pod.initContainers.flatMap((c) => c.volumeMounts ?? []).map((m) => m.name);
    expect(others).not.toContain('agent-run');
  });

  it('runs the agent unprivileged: ALL dropped, the capabilities it checks added, spc_t, /proc/sys/net writable', () => {
    const agent = pod.containers.find((c) => c.name === 'agent')!;
    expect(agent.securityContext).toEqual({
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: AGENT_CAPABILITIES.map((c) => c.name.replace(/^CAP_/, '')) },
      seLinuxOptions: { type: 'spc_t' },
    });
    const sysctls = agent.volumeMounts?.find((m) => m.mountPath === HOST_PROC_SYS_NET);
    expect(pod.volumes?.find((v) => v.name === sysctls?.name)?.hostPath?.path).toBe('/proc/sys/net');
  });

  it('probes its own agent through the health socket it names, not a port another agent may hold', () => {
    const agent = pod.containers.find((c) => c.name === 'agent')!;
    const at = agent.command!.indexOf('--health-socket');
    const socket = agent.command![at + 1]!;
    // The pod's own /dev/shm: no other pod (the other agent of a surge rollout) sees it.
    expect(socket.startsWith('/dev/shm/')).toBe(true);
    expect(agent.livenessProbe).toMatchObject({
      exec: { command: [`/app/${SHIM_SOURCE_FILE}`, 'health', socket, 'live'] },
    });
    expect(agent.readinessProbe).toMatchObject({
      exec: { command: [`/app/${SHIM_SOURCE_FILE}`, 'health', socket, 'ready'] },
    });
    expect(agent.livenessProbe?.httpGet).toBeUndefined();
  });

  it('is node-critical, on Linux nodes only, and tolerates every taint', () => {
    expect(pod.priorityClassName).toBe('system-node-critical');
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    // A toleration without key and effect, operator Exists, matches every taint (Karpenter's startup taints too).
    expect(pod.tolerations).toEqual([{ operator: 'Exists' }]);
  });

  it('schedules only on the architectures the image index has (amd64, arm64)', () => {
    expect(pod.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] }] },
          ],
        },
      },
    });
    expect(IMAGE_ARCHES.map((a) => (a === 'x64' ? 'amd64' : a)).sort()).toEqual(['amd64', 'arm64']);
  });

  it('rolls out by surge: a node keeps its pod until the new installer has run', () => {
    expect(ds.spec.updateStrategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 0, maxSurge: '10%' },
    });
  });
});

describe('renderDaemonSet', () => {
  it('replaces the placeholder and changes no other line', () => {
    const out = renderDaemonSet(manifest, URI);
    const changed = out.split('\n').filter((line, i) => line !== manifest.split('\n')[i]);
    expect(changed).toEqual([`          image: ${URI}`, `          image: ${URI}`]);
  });

  it('leaves an image that is not a string when unrendered, which the API server refuses', () => {
    const install = daemonSet(parseManifest(manifest)).spec.template.spec.initContainers.find(
      (c) => c.name === 'install',
    )!;
    expect(typeof install.image).toBe('object');
    expect(manifest.split('\n').filter((l) => l.trim() === `image: ${IMAGE_PLACEHOLDER}`)).toHaveLength(2);
  });

  it('takes a tag, and refuses what is not a full image reference or a manifest without the placeholder', () => {
    expect(renderDaemonSet(manifest, 'r.example:5000/team/vpc-lease-cni:0.1.0')).toContain(
      'image: r.example:5000/team/vpc-lease-cni:0.1.0\n',
    );
    expect(() => renderDaemonSet(manifest, 'x; rm -rf /')).toThrow(/not an image reference/);
    expect(() => renderDaemonSet(manifest, 'vpc-lease-cni:0.1.0')).toThrow(/not an image reference/);
    expect(() => renderDaemonSet(manifest, 'r.example/vpc-lease-cni')).toThrow(/not an image reference/);
    expect(() => renderDaemonSet(manifest, '-r.example/x:1')).toThrow(/not an image reference/);
    expect(() => renderDaemonSet(renderDaemonSet(manifest, URI), URI)).toThrow(/found 0/);
  });
});
