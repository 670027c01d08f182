import { resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { seaSuite, seaTests } from '../runtime/sea-vm-suite.js';
import { missing } from '../support/capabilities.js';
import type { PluginRun } from '../support/plugin-process.js';
import { withPods } from './guest/ipv6-cases.js';
import { ipv6Suite, ipv6Tests } from './ipv6-suite.js';
import { ipvlanSuite, ipvlanTests } from './ipvlan-suite.js';
import { runGuestSuites, type SuiteRun } from './suites.js';

/**
 * One VM boot (real ipvlan) for the guest suites below, run one after the other, each in a fresh network
 * namespace (suites.ts); each guest case becomes a test here, so a guest failure reads like any other failing
 * test. A new guest suite joins by adding itself to SUITES and registering its tests below. The IPv6 suite shares
 * the boot: a boot of its own cost a second VM start, CNI build and guest node start, while this file's length
 * stays under the rest of the suite's share of the other core.
 */
const skipReason = missing('vm', 'root');
const SUITES = [ipvlanSuite, ipv6Suite, seaSuite];
let runs: Map<string, SuiteRun> | undefined;

describe.skipIf(skipReason !== undefined)('VM: guest suites in one boot', () => {
  beforeAll(
    async () => {
      const verbose = process.env['VPC_LEASE_VM_VERBOSE'] === '1';
      runs = await runGuestSuites(SUITES, resolve('.test-results/vm'), {
        ...(verbose ? { onLine: (line: string) => process.stderr.write(`vm: ${line}\n`) } : {}),
      });
    },
    SUITES.reduce((ms, s) => ms + s.timeoutS * 1000, 120_000),
  );

  describe('real ipvlan suite', () => ipvlanTests(() => runs?.get(ipvlanSuite.name)));
  describe('IPv6 pods on real ipvlan', () => ipv6Tests(() => runs?.get(ipv6Suite.name)));
  describe('the single executable on real ipvlan, without Node.js', () => seaTests(() => runs?.get(seaSuite.name)));
});

/**
 * The IPv6 guest cases DEL their pods whatever happens (guest/ipv6-cases.ts withPods): a case that fails between
 * its ADD and its DEL must not leave a CLAIMED lease that fails every case after it. Checked here against a
 * recording stand-in for the guest node's plugin calls; the VM runs the real ones. In this file, which imports the
 * cases anyway, rather than a file of its own: a test file costs a fork and its imports.
 */
function recorder(delCode = 0) {
  const calls: string[] = [];
  const node = {
    run: async (command: string, options: { containerId: string }): Promise<PluginRun> => {
      calls.push(`${command} ${options.containerId}`);
      return { code: command === 'DEL' ? delCode : 0, stdout: '{}', stderr: '', json: {} };
    },
  };
  return { node, calls };
}

describe('IPv6 guest cases: cleanup whatever happens', () => {
  it('DELs the pods a failing case ADDed, then rethrows its failure', async () => {
    const { node, calls } = recorder();
    const failing = withPods(node, async (pods) => {
      await pods.add('a', 'ns-a', {});
      await pods.add('b', 'ns-b', {});
      throw new Error('the case failed before its DEL');
    });
    await expect(failing).rejects.toThrow('the case failed before its DEL');
    expect(calls).toEqual(['ADD a', 'ADD b', 'DEL a', 'DEL b']);
  });

  it('DELs a pod whose ADD itself threw (an ADD failing half-way leaves state too)', async () => {
    const { node, calls } = recorder();
    const throwing = {
      run: async (c: string, o: { containerId: string }) => {
        if (c === 'ADD') throw new Error('spawn failed');
        return node.run(c, o);
      },
    };
    await expect(withPods(throwing, (pods) => pods.add('a', 'ns-a', {}).then(() => undefined))).rejects.toThrow();
    expect(calls).toEqual(['DEL a']);
  });

  it('adds no DEL to a case that DELeted its own pods', async () => {
    const { node, calls } = recorder();
    await withPods(node, async (pods) => {
      await pods.add('a', 'ns-a', {});
      await pods.del('a');
    });
    expect(calls).toEqual(['ADD a', 'DEL a']);
  });

  it('keeps the case failure, not the cleanup one, when the cleanup DEL fails too', async () => {
    const { node, calls } = recorder(1);
    const failing = withPods(node, async (pods) => {
      await pods.add('a', 'ns-a', {});
      throw new Error('first failure');
    });
    await expect(failing).rejects.toThrow('first failure');
    expect(calls).toEqual(['ADD a', 'DEL a']);
  });
});
