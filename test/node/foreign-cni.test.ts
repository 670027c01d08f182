import { describe, expect, it } from 'vitest';
import { ALLOW_OTHER_CNI_FLAG, type ConfDirEntry, foreignPrimaryCni } from '../../node/installer/foreign-cni.js';
import { PLUGIN_TYPE } from '../../node/installer/install.js';

const OURS = '10-vpc-lease.conflist';
const CONF_DIR = '/etc/cni/net.d';

/** What aws-node writes (amazon-vpc-cni-k8s misc/10-aws.conflist, trimmed). */
const AWS_NODE = JSON.stringify({
  cniVersion: '0.4.0',
  name: 'aws-cni',
  disableCheck: true,
  plugins: [
    { name: 'aws-cni', type: 'aws-cni', vethPrefix: 'eni', mtu: '9001' },
    { name: 'egress-cni', type: 'egress-cni', mtu: '9001', enabled: 'false' },
    { type: 'portmap', capabilities: { portMappings: true }, snat: true },
  ],
});
const CILIUM = JSON.stringify({ cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni' }] });
const OUR_LIST = JSON.stringify({
  cniVersion: '1.1.0',
  name: 'vpc-lease',
  plugins: [{ type: PLUGIN_TYPE }, { type: 'portmap' }],
});

const check = (entries: ConfDirEntry[]) =>
  foreignPrimaryCni({ entries, ourConfName: OURS, ourPluginType: PLUGIN_TYPE, confDir: CONF_DIR });

describe('Function: foreignPrimaryCni', () => {
  it('names aws-node’s 10-aws.conflist, which sorts before ours, with the fix and the override', () => {
    const found = check([
      { name: OURS, content: OUR_LIST },
      { name: '10-aws.conflist', content: AWS_NODE },
    ]);
    expect(found?.file).toBe('/etc/cni/net.d/10-aws.conflist');
    expect(found?.pluginTypes).toEqual(['aws-cni', 'egress-cni', 'portmap']);
    expect(found?.message).toContain('/etc/cni/net.d/10-aws.conflist');
    expect(found?.message).toContain('kubectl -n kube-system delete daemonset aws-node');
    expect(found?.message).toContain('bootstrapSelfManagedAddons: false');
    expect(found?.message).toContain(ALLOW_OTHER_CNI_FLAG);
    expect(ALLOW_OTHER_CNI_FLAG).toBe('--allow-other-cni');
  });

  it('finds it before our conflist exists (first install on an EKS node)', () => {
    expect(check([{ name: '10-aws.conflist', content: AWS_NODE }])?.file).toBe('/etc/cni/net.d/10-aws.conflist');
  });

  it('names Cilium’s 05-cilium.conflist with the generic fix', () => {
    const found = check([{ name: '05-cilium.conflist', content: CILIUM }]);
    expect(found?.pluginTypes).toEqual(['cilium-cni']);
    expect(found?.message).toContain('remove the CNI that writes it');
    expect(found?.message).not.toContain('aws-node');
  });

  it('names a single-plugin .conf that sorts first', () => {
    const bridge = JSON.stringify({ cniVersion: '0.4.0', name: 'mynet', type: 'bridge', bridge: 'cni0' });
    expect(check([{ name: '00-bridge.conf', content: bridge }])?.pluginTypes).toEqual(['bridge']);
    expect(check([{ name: '00-bridge.json', content: bridge }])?.file).toBe('/etc/cni/net.d/00-bridge.json');
  });

  it('lets a file sorting after ours be: the runtime never reaches it', () => {
    expect(check([{ name: '20-aws.conflist', content: AWS_NODE }])).toBeUndefined();
    // Byte order, as Go's sort.Strings: '1' (0x31) sorts after '0', and upper case before lower case.
    expect(check([{ name: '10-zz.conflist', content: AWS_NODE }])).toBeUndefined();
    expect(check([{ name: '10-VPC.conflist', content: AWS_NODE }])?.file).toBe('/etc/cni/net.d/10-VPC.conflist');
  });

  it('takes a configuration whose primary plugin is ours as ours (an older name, or a chain around it)', () => {
    expect(check([{ name: '05-vpc-lease.conflist', content: OUR_LIST }])).toBeUndefined();
    const chainedAroundUs = JSON.stringify({
      cniVersion: '1.0.0',
      name: 'vpc-lease',
      plugins: [{ type: PLUGIN_TYPE }, { type: 'cilium-cni', 'chaining-mode': 'generic-veth' }],
    });
    expect(check([{ name: '05-cilium.conflist', content: chainedAroundUs }])).toBeUndefined();
    // Our older file wins over aws-node's only when it sorts first; here aws-node's still does.
    expect(
      check([
        { name: '10-aws.conflist', content: AWS_NODE },
        { name: '10-vpc-lease.conf', content: JSON.stringify({ name: 'vpc-lease', type: PLUGIN_TYPE }) },
      ])?.file,
    ).toBe('/etc/cni/net.d/10-aws.conflist');
  });

  it('skips what the runtime skips: other extensions, directories, unloadable and plugin-only files', () => {
    expect(
      check([
        { name: '00-aws.conflist.bak', content: AWS_NODE },
        { name: '.10-aws.conflist.1234.tmp', content: AWS_NODE },
        { name: '00-notes.txt', content: 'hello' },
        { name: '00-dir.conflist' },
        { name: '00-broken.conflist', content: '{"name":' },
        { name: '00-noname.conflist', content: JSON.stringify({ plugins: [{ type: 'bridge' }] }) },
        { name: '00-empty.conflist', content: JSON.stringify({ name: 'x', plugins: [] }) },
        { name: '00-untyped.conflist', content: JSON.stringify({ name: 'x', plugins: [{ type: 'a' }, {}] }) },
        // A conflist body in a .conf file: no top-level type ("perhaps this is a .conflist?").
        { name: '00-plugin-only.conf', content: AWS_NODE },
        { name: '00-array.json', content: '[]' },
      ]),
    ).toBeUndefined();
  });

  it('reports the first of several that sort before ours', () => {
    expect(
      check([
        { name: '10-aws.conflist', content: AWS_NODE },
        { name: '05-cilium.conflist', content: CILIUM },
      ])?.file,
    ).toBe('/etc/cni/net.d/05-cilium.conflist');
  });
});
