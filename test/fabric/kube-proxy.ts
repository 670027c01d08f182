import { createHash } from 'node:crypto';

/**
 * kube-proxy's iptables mode, written the way its proxier (pkg/proxy/iptables/proxier.go) writes it for one node:
 * KUBE-SERVICES → KUBE-SVC-<hash> (masquerade mark for sources outside the cluster CIDR, then random-probability
 * jumps to KUBE-SEP-<hash>, which DNAT), KUBE-NODEPORTS → KUBE-EXT-<hash> (Cluster: mark and go to the SVC chain;
 * Local: pod and LOCAL-source traffic to the SVC chain, everything else to KUBE-SVL-<hash> with this node's
 * endpoints only, or dropped when it has none), KUBE-MARK-MASQ setting 0x4000, and KUBE-POSTROUTING masquerading
 * marked packets. Chain names use kube-proxy's hash (base32 of SHA-256 of "ns/name:port" + protocol), so the
 * output reads like iptables-save on a real node. An IPv6 service (a ClusterIP with a colon) gets what kube-proxy's
 * ip6tables proxier writes: /128 matches, `[ip]:port` endpoints (net.JoinHostPort, in the DNAT target and the SEP
 * chain's hash alike) and icmp6-port-unreachable. Not covered: session affinity, topology hints, LoadBalancer.
 */
export interface Endpoint {
  readonly ip: string;
  readonly port: number;
  readonly node: string;
}

export interface Service {
  readonly namespace: string;
  readonly name: string;
  readonly portName: string;
  readonly protocol: 'tcp' | 'udp';
  readonly clusterIp: string;
  readonly port: number;
  readonly nodePort?: number;
  readonly externalTrafficPolicy?: 'Cluster' | 'Local';
  readonly endpoints: readonly Endpoint[];
}

export interface ProxierOptions {
  /** `--cluster-cidr` (detect-local-mode ClusterCIDR): traffic from outside it to a ClusterIP is masqueraded. */
  readonly clusterCidr?: string;
  /** This node's name: picks the local endpoints for externalTrafficPolicy Local. */
  readonly nodeName: string;
}

const MASQ_MARK = '0x4000';
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function base32(bytes: Buffer): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

function hash(text: string): string {
  return base32(createHash('sha256').update(text).digest()).slice(0, 16);
}

function portName(s: Service): string {
  return `${s.namespace}/${s.name}${s.portName ? `:${s.portName}` : ''}`;
}

export function svcChain(s: Service): string {
  return `KUBE-SVC-${hash(portName(s) + s.protocol)}`;
}

function chainOf(prefix: string, s: Service): string {
  return `${prefix}-${hash(portName(s) + s.protocol)}`;
}

/** An endpoint as Go's net.JoinHostPort writes it, which is what kube-proxy hashes and prints. */
function hostPort(e: Endpoint): string {
  return e.ip.includes(':') ? `[${e.ip}]:${e.port}` : `${e.ip}:${e.port}`;
}

/** The host mask of a service's family. */
function host(s: Service): string {
  return s.clusterIp.includes(':') ? '128' : '32';
}

function sepChain(s: Service, e: Endpoint): string {
  return `KUBE-SEP-${hash(portName(s) + s.protocol + hostPort(e))}`;
}

/** Random-probability jumps, as kube-proxy prints them: 1/n, 1/(n-1), …, then the last unconditionally. */
function endpointJumps(s: Service, chain: string, endpoints: readonly Endpoint[]): string[] {
  return endpoints.map((e, i) => {
    const left = endpoints.length - i;
    const comment = `-m comment --comment "${portName(s)} -> ${hostPort(e)}"`;
    return left > 1
      ? `-A ${chain} ${comment} -m statistic --mode random --probability ${(1 / left).toFixed(11)} -j ${sepChain(s, e)}`
      : `-A ${chain} ${comment} -j ${sepChain(s, e)}`;
  });
}

/**
 * The jumps from the built-in chains, which kube-proxy ensures one by one (`iptables -C`, then `-I`/`-A`) rather
 * than restoring, so other owners' rules in those chains survive. [table, rule without -A].
 */
export const KUBE_JUMPS: readonly (readonly [string, string])[] = [
  [
    'filter',
    'INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  ],
  ['filter', 'FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD'],
  ['filter', 'FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  [
    'filter',
    'FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES',
  ],
  ['filter', 'OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  ['nat', 'PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  ['nat', 'OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'],
  ['nat', 'POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING'],
];

/** The iptables-restore input (for `--noflush`) kube-proxy would write on `nodeName`: its own chains only. */
export function kubeProxyRules(services: readonly Service[], options: ProxierOptions): string {
  const filterChains = ['KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-NODEPORTS', 'KUBE-SERVICES'];
  const natChains = ['KUBE-MARK-MASQ', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-SERVICES'];
  const filter: string[] = [
    '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
    `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark ${MASQ_MARK}/${MASQ_MARK} -j ACCEPT`,
    '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
  ];
  const nat: string[] = [
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MASQ_MARK}`,
    `-A KUBE-POSTROUTING -m mark ! --mark ${MASQ_MARK}/${MASQ_MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MASQ_MARK}`,
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  ];
  for (const s of services) {
    const name = portName(s);
    const proto = `-m ${s.protocol} -p ${s.protocol}`;
    const svc = svcChain(s);
    natChains.push(svc);
    if (s.endpoints.length === 0) {
      filter.push(
        `-A KUBE-SERVICES -m comment --comment "${name} has no endpoints" ${proto} -d ${s.clusterIp}/${host(s)} --dport ${s.port} -j REJECT --reject-with ${host(s) === '128' ? 'icmp6' : 'icmp'}-port-unreachable`,
      );
      continue;
    }
    nat.push(
      `-A KUBE-SERVICES -m comment --comment "${name} cluster IP" ${proto} -d ${s.clusterIp}/${host(s)} --dport ${s.port} -j ${svc}`,
    );
    if (options.clusterCidr)
      nat.push(
        `-A ${svc} -m comment --comment "${name} cluster IP" ${proto} -d ${s.clusterIp}/${host(s)} --dport ${s.port} ! -s ${options.clusterCidr} -j KUBE-MARK-MASQ`,
      );
    nat.push(...endpointJumps(s, svc, s.endpoints));
    for (const e of s.endpoints) {
      const sep = sepChain(s, e);
      natChains.push(sep);
      nat.push(`-A ${sep} -m comment --comment ${name} -s ${e.ip}/${host(s)} -j KUBE-MARK-MASQ`);
      nat.push(`-A ${sep} -m comment --comment ${name} ${proto} -j DNAT --to-destination ${hostPort(e)}`);
    }
    if (s.nodePort === undefined) continue;
    const ext = chainOf('KUBE-EXT', s);
    natChains.push(ext);
    nat.push(`-A KUBE-NODEPORTS -m comment --comment ${name} ${proto} --dport ${s.nodePort} -j ${ext}`);
    if (s.externalTrafficPolicy === 'Local') {
      const svl = chainOf('KUBE-SVL', s);
      const local = s.endpoints.filter((e) => e.node === options.nodeName);
      if (options.clusterCidr)
        nat.push(
          `-A ${ext} -s ${options.clusterCidr} -m comment --comment "pod traffic for ${name} external destinations" -j ${svc}`,
        );
      nat.push(
        `-A ${ext} -m comment --comment "masquerade LOCAL traffic for ${name} external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
        `-A ${ext} -m comment --comment "route LOCAL traffic for ${name} external destinations" -m addrtype --src-type LOCAL -j ${svc}`,
        `-A ${ext} -j ${svl}`,
      );
      natChains.push(svl);
      if (local.length === 0)
        filter.push(
          `-A KUBE-EXTERNAL-SERVICES -m comment --comment "${name} has no local endpoints" ${proto} -m addrtype --dst-type LOCAL --dport ${s.nodePort} -j DROP`,
        );
      else nat.push(...endpointJumps(s, svl, local));
    } else {
      nat.push(
        `-A ${ext} -m comment --comment "masquerade traffic for ${name} external destinations" -j KUBE-MARK-MASQ`,
        `-A ${ext} -j ${svc}`,
      );
    }
  }
  nat.push(
    '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
  );
  return [
    '*filter',
    ...filterChains.map((c) => `:${c} - [0:0]`),
    ...filter,
    'COMMIT',
    '*nat',
    ...[...new Set(natChains)].map((c) => `:${c} - [0:0]`),
    ...nat,
    'COMMIT',
    '',
  ].join('\n');
}
