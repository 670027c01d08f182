import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as runOperatorCli } from '../../cli/cli.js';
import { type Ec2SimulatorServer, startEc2Simulator } from '../../local-cloud/ec2/index.js';
import { createScheduler, type SimScheduler } from '../../local-cloud/events/scheduler.js';
import { ImdsService } from '../../local-cloud/imds/service.js';
import { runMaxPods } from '../../node/max-pods/command.js';
import { checkKubeletMaxPods } from '../../node/max-pods/figure.js';
import { kubeletMaxPods, maxPodsInKubeletArgs, maxPodsInKubeletConfig } from '../../node/max-pods/kubelet.js';
import { buildCni } from '../../packaging/build.js';

const run = promisify(execFile);

async function node(env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runMaxPods(args, env, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

async function operator(...args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await runOperatorCli(args, { out: (t) => (out += t), err: () => {}, env: {} });
  return { code, out };
}

describe('vpc-lease-cni max-pods', () => {
  let dir: string;
  let scheduler: SimScheduler;
  let sim: Ec2SimulatorServer;
  let imds: ImdsService;
  const imdsOf = new Map<string, string>();
  const envFor = (type: string): NodeJS.ProcessEnv => ({
    VPC_LEASE_TEST_MODE: '1',
    AWS_EC2_METADATA_SERVICE_ENDPOINT: imdsOf.get(type)!,
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-max-pods-'));
    scheduler = createScheduler({ timeScale: 0.01 });
    sim = await startEc2Simulator({ region: 'us-east-1', accountId: '123456789012', seed: 5 });
    const vpc = sim.admin.seedVpc('10.1.0.0/16');
    const subnetId = sim.admin.seedSubnet(vpc.vpcId, '10.1.4.0/22', 'us-east-1a').subnetId;
    imds = new ImdsService({ ec2: sim.api, scheduler });
    for (const type of ['m5.large', 't3.micro', 'c5.4xlarge']) {
      const instance = sim.api.launchInstance({ instanceType: type, subnetId });
      imdsOf.set(type, await imds.endpointFor(instance.instanceId));
    }
  });
  afterAll(async () => {
    await imds.close();
    await sim.close();
    scheduler.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['m5.large', {}, []],
    ['m5.large', { prefixDelegation: true, maxPodsCap: 250 }, ['--prefix-delegation', '--max-pods-cap', '250']],
    ['t3.micro', { prefixDelegation: true }, ['--prefix-delegation']],
    ['c5.4xlarge', { maxPodsCap: 50 }, ['--max-pods-cap', '50']],
  ] as const)(
    'on %s with %j prints what `vpc-lease max-pods` prints for the same settings',
    async (type, config, flags) => {
      const ours = await node(envFor(type), '--config', JSON.stringify(config));
      const theirs = await operator('max-pods', type, ...flags);
      expect(ours.code, ours.err).toBe(0);
      expect(theirs.code).toBe(0);
      expect(ours.out).toBe(theirs.out);
      expect(Number(ours.out.split('\n')[0])).toBeGreaterThan(0);
    },
  );

  it('reads the installed conflist, and VPC_LEASE_CNI_CONFIG as the installer does', async () => {
    const conflist = join(dir, '10-vpc-lease.conflist');
    writeFileSync(
      conflist,
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'vpc-lease',
        plugins: [{ type: 'vpc-lease-cni', prefixDelegation: true, maxPodsCap: 250 }, { type: 'portmap' }],
      }),
    );
    const fromConflist = await node(envFor('m5.large'), '--conflist', conflist, '--json');
    expect(fromConflist.code, fromConflist.err).toBe(0);
    expect(JSON.parse(fromConflist.out)).toMatchObject({ instanceType: 'm5.large', maxPods: 250 });
    const fromEnv = await node({ ...envFor('m5.large'), VPC_LEASE_CNI_CONFIG: '{"maxPodsCap": 12}' });
    expect(fromEnv.out.split('\n')[0]).toBe('12');
    // Without any of them it looks for the installer's conflist in its conf dir.
    const defaulted = await node({ ...envFor('m5.large'), VPC_LEASE_CNI_CONF_DIR: dir }, '--json');
    expect(JSON.parse(defaulted.out)).toMatchObject({ maxPods: 250 });
  });

  it('refuses what it cannot read, with a clear message and exit 2', async () => {
    const bad = [
      [['--config', '{"maxPodsCap": 0}'], /maxPodsCap/],
      [['--config', '{"prefixDelegaton": true}'], /unsupported field.*prefixDelegaton/],
      [['--conflist', join(dir, 'absent.conflist')], /no conflist/],
      [['--bogus'], /unknown argument --bogus/],
    ] as const;
    for (const [args, message] of bad) {
      const r = await node(envFor('m5.large'), ...args);
      expect(r.code).toBe(2);
      expect(r.out).toBe('');
      expect(r.err).toMatch(message);
    }
    // An IMDS endpoint override outside test mode is refused, not followed.
    const r = await node({ AWS_EC2_METADATA_SERVICE_ENDPOINT: imdsOf.get('m5.large') }, '--config', '{}');
    expect(r.code).toBe(2);
    expect(r.err).toContain('honoured only in test mode');
  });

  describe('the kubelet check', () => {
    const write = (name: string, text: string): string => {
      const path = join(dir, name);
      mkdirSync(join(path, '..'), { recursive: true });
      writeFileSync(path, text);
      return path;
    };

    it("warns and exits 1 when kubelet's max-pods exceeds ours (nodeadm's EKS formula, 29 on m5.large)", async () => {
      const config = write('eks/config.json', JSON.stringify({ kind: 'KubeletConfiguration', maxPods: 29 }));
      const r = await node(envFor('m5.large'), '--config', '{}', '--kubelet-config', config);
      expect(r.code).toBe(1);
      expect(r.out.split('\n')[0]).toBe('20');
      expect(r.err).toContain(`warning: kubelet's max-pods 29 (${config}) exceeds vpc-lease's 20`);
    });

    it('control: passes when kubelet has our figure, from a nodeadm drop-in over the base config', async () => {
      const config = write('ok/config.json', JSON.stringify({ maxPods: 29 }));
      write('ok/config.json.d/40-nodeadm.conf', JSON.stringify({ maxPods: 20 }));
      write('ok/config.json.d/not-a-drop-in.json', JSON.stringify({ maxPods: 99 }));
      const r = await node(envFor('m5.large'), '--config', '{}', '--kubelet-config', config);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toContain('is within');
    });

    it('reads YAML configs and flag files, flags last as kubelet does', async () => {
      const yaml = write(
        'k.yaml',
        'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 18 # ours\n',
      );
      const args = write('environment', 'NODEADM_KUBELET_ARGS="--node-ip=10.0.0.1 --max-pods=25"\n');
      expect(kubeletMaxPods({ configPath: yaml })).toEqual({ maxPods: 18, source: yaml });
      expect(kubeletMaxPods({ configPath: yaml, argsPath: args })).toEqual({ maxPods: 25, source: args });
      expect(maxPodsInKubeletArgs("Environment='KUBELET_EXTRA_ARGS=--max-pods 30'", 'al2')).toBe(30);
      expect(maxPodsInKubeletConfig('evictionHard:\n  maxPods: 7\n', 'nested')).toBeUndefined();
      expect(kubeletMaxPods({})).toEqual({ maxPods: 110, source: 'kubelet default' });
      const r = await node(envFor('m5.large'), '--config', '{}', '--kubelet-config', yaml, '--kubelet-args', args);
      expect(r.code).toBe(1);
    });

    it('refuses a config it cannot read for sure', () => {
      expect(() => maxPodsInKubeletConfig('maxPods: 20\nmaxPods: 30\n', 'dup')).toThrow(/more than once/);
      expect(() => maxPodsInKubeletConfig('maxPods: "20"\n', 'quoted')).toThrow(/not a count/);
      expect(() => maxPodsInKubeletConfig('{"maxPods": -1}', 'negative')).toThrow(/not a count/);
      expect(() => maxPodsInKubeletArgs('--max-pods=lots', 'flags')).toThrow(/not a count/);
      expect(() => kubeletMaxPods({ configPath: join(dir, 'absent.json') })).toThrow(/cannot read/);
    });

    it('is one exported function for the installer: checkKubeletMaxPods', async () => {
      const config = write('inst/config.json', JSON.stringify({ maxPods: 29 }));
      const over = await checkKubeletMaxPods({ pluginConfig: {}, kubeletConfigPath: config, env: envFor('m5.large') });
      expect(over).toMatchObject({ ours: 20, exceeds: true, kubelet: { maxPods: 29 } });
      const within = await checkKubeletMaxPods({
        pluginConfig: { maxPodsCap: 250, prefixDelegation: true },
        kubeletConfigPath: config,
        env: {},
        instanceType: 'm5.large',
      });
      expect(within).toMatchObject({ ours: 250, exceeds: false });
    });
  });

  it('runs as `vpc-lease-cni max-pods` from the built binary, table and all', async () => {
    const cni = await buildCni(join(dir, 'bin'));
    const { stdout } = await run(cni, ['max-pods', '--config', '{}', '--json'], { env: envFor('m5.large') });
    expect(JSON.parse(stdout)).toMatchObject({ instanceType: 'm5.large', maxPods: 20, podEniSlots: 2 });
    // The installer runs the same check after installing: a warning, never a failed install.
    const kubelet = (maxPods: number) => {
      const path = join(dir, `installer-kubelet-${maxPods}.json`);
      writeFileSync(path, JSON.stringify({ maxPods }));
      return path;
    };
    const install = (maxPods: number) => {
      const target = mkdtempSync(join(dir, 'install-'));
      return run(
        cni,
        ['install', '--no-wait-ready', '--bin-dir', join(target, 'bin'), '--conf-dir', join(target, 'net.d')].concat([
          '--service-cidrs',
          '10.96.0.0/12',
          '--kubelet-config',
          kubelet(maxPods),
        ]),
        { env: envFor('m5.large') },
      );
    };
    expect((await install(29)).stderr).toMatch(/warning: [^\n]*max-pods[^\n]*29/);
    const within = (await install(20)).stderr;
    expect(within, within).not.toMatch(/warning: [^\n]*max-pods/);
  }, 120_000);
});
