import { describe, expect, it } from 'vitest';
import { kubeProxyRules, type Service, svcChain } from './kube-proxy.js';

const svc: Service = {
  namespace: 'ns1',
  name: 'svc1',
  portName: 'p80',
  protocol: 'tcp',
  clusterIp: '172.30.0.41',
  port: 80,
  endpoints: [{ ip: '10.180.0.1', port: 80, node: 'a' }],
};

describe("kube-proxy's iptables rules, as the fabric applies them", () => {
  it('names chains with kube-proxy’s hash (the values in its proxier tests)', () => {
    expect(svcChain(svc)).toBe('KUBE-SVC-XPGD46QRK7WJZT7O');
    expect(kubeProxyRules([svc], { nodeName: 'a' })).toContain('KUBE-SEP-SXIVWICOYRO3J4NJ');
  });

  it('marks outside-the-cluster sources for masquerade and DNATs through one SEP chain per endpoint', () => {
    const rules = kubeProxyRules(
      [{ ...svc, endpoints: [...svc.endpoints, { ip: '10.180.0.2', port: 80, node: 'b' }] }],
      {
        nodeName: 'a',
        clusterCidr: '10.0.0.0/8',
      },
    );
    expect(rules).toMatch(/-A KUBE-SVC-XPGD46QRK7WJZT7O .* ! -s 10\.0\.0\.0\/8 -j KUBE-MARK-MASQ/);
    expect(rules).toMatch(/--probability 0\.50000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ/);
    expect(rules).toMatch(/-j DNAT --to-destination 10\.180\.0\.2:80/);
    expect(rules).toContain('-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000');
    expect(rules).toContain('-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN');
  });

  it('sends externalTrafficPolicy Local NodePort traffic to this node’s endpoints only, or drops it', () => {
    const local: Service = {
      ...svc,
      nodePort: 30081,
      externalTrafficPolicy: 'Local',
      endpoints: [
        { ip: '10.180.0.1', port: 80, node: 'a' },
        { ip: '10.180.0.2', port: 80, node: 'b' },
      ],
    };
    const onA = kubeProxyRules([local], { nodeName: 'a', clusterCidr: '10.0.0.0/8' });
    const svl = /-A (KUBE-SVL-\w+) .*-j (KUBE-SEP-\w+)/.exec(onA);
    expect(svl).not.toBeNull();
    expect(onA).toMatch(/-A KUBE-EXT-\w+ -j KUBE-SVL-/);
    expect(onA.split('\n').filter((l) => l.startsWith(`-A ${svl![1]}`))).toHaveLength(1);
    expect(onA).not.toMatch(/KUBE-EXT-\w+ -m comment --comment "masquerade traffic/);
    const onC = kubeProxyRules([local], { nodeName: 'c', clusterCidr: '10.0.0.0/8' });
    expect(onC).toMatch(/"ns1\/svc1:p80 has no local endpoints" .* --dport 30081 -j DROP/);
  });

  it('masquerades all externalTrafficPolicy Cluster NodePort traffic', () => {
    const rules = kubeProxyRules([{ ...svc, nodePort: 30080, externalTrafficPolicy: 'Cluster' }], { nodeName: 'a' });
    expect(rules).toMatch(/-A KUBE-NODEPORTS .* --dport 30080 -j KUBE-EXT-/);
    expect(rules).toMatch(
      /-A KUBE-EXT-\w+ -m comment --comment "masquerade traffic for ns1\/svc1:p80 external destinations" -j KUBE-MARK-MASQ/,
    );
    expect(rules.trimEnd().split('\n').at(-2)).toMatch(/KUBE-SERVICES .*NOTE: this must be the last rule/);
  });

  it('writes an IPv6 service as the ip6tables proxier does: /128, [ip]:port endpoints, icmp6 reject', () => {
    const v6: Service = { ...svc, clusterIp: 'fd00:96::41', endpoints: [{ ip: '2600:1f18::10', port: 80, node: 'a' }] };
    const rules = kubeProxyRules([v6, { ...v6, name: 'empty', endpoints: [] }], { nodeName: 'a' });
    expect(rules).toMatch(/-d fd00:96::41\/128 --dport 80 -j KUBE-SVC-/);
    expect(rules).toMatch(/-s 2600:1f18::10\/128 -j KUBE-MARK-MASQ/);
    expect(rules).toContain('-j DNAT --to-destination [2600:1f18::10]:80');
    expect(rules).toContain('"ns1/svc1:p80 -> [2600:1f18::10]:80"');
    expect(rules).toMatch(/"ns1\/empty:p80 has no endpoints" .* -j REJECT --reject-with icmp6-port-unreachable/);
    expect(rules).not.toMatch(/\/32 /);
  });
});
