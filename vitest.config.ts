import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest files, longest first (CI seconds on 2 cores in the comment). vitest's own order puts files it has
 * no timing for by size, and these are small files that boot a VM or run for a minute: started last, one of them
 * ran alone while the other worker idled (chaos, 56 s, was CI's last file). Started first, the workers finish
 * together.
 */
export const LONGEST_FIRST: readonly string[] = [
  'test/vm/ipvlan-vm.test.ts', // ~450-500 s (estimate): the ipvlan, IPv6 and single-executable guest suites, one VM boot
  'test/fabric/fabric.test.ts', // ~250-380 s: the VPC fabric, one configuration and a share of its controls, one VM boot
  'test/e2e/start.test.ts', // ~75 s
  'test/node/plugin-netns.test.ts', // ~72 s: the built plugin in real netns
  'test/chaos/chaos.test.ts', // ~56 s
  'test/control-plane/local-cloud.test.ts', // ~53 s
  'test/runtime/cri.test.ts', // ~24 s
  'test/runtime/image-index.test.ts', // ~23 s
  'test/cli/process.test.ts', // ~21 s
  'test/runtime/kubelet.test.ts', // ~20 s
];

/** Test files run in a process of their own (see `projects` below). */
const ISOLATED: string[] = [
  'test/node/**/*.test.ts',
  'test/runtime/**/*.test.ts',
  'test/cluster/**/*.test.ts',
  'test/security/**/*.test.ts',
  'test/fabric/**/*.test.ts',
  'test/vm/**/*.test.ts',
  'test/cli/**/*.test.ts',
  'test/e2e/**/*.test.ts',
  'test/chaos/**/*.test.ts',
  'test/control-plane/handler.test.ts',
  'test/dynamo/light-client.test.ts',
  'test/local/imds.test.ts',
];

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification): number => {
      const i = LONGEST_FIRST.indexOf(relative(f.project.config.root, f.moduleId));
      return i < 0 ? LONGEST_FIRST.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order after the listed files.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

/**
 * The one-node Kubernetes cluster (test/cluster) runs only when asked (`npm run test:cluster`): it has not yet
 * passed repeatedly within the suite's budget, and a red suite blocks every change.
 */
const CLUSTER = process.env['VPC_LEASE_CLUSTER'] === '1' ? [] : ['test/cluster/**'];

export default defineConfig({
  test: {
    exclude: ['test/vm/guest/**', 'node_modules/**', ...CLUSTER],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: keep at most two suite processes so timing-sensitive simulator tests are not starved.
    maxWorkers: 2,
    sequence: { sequencer: LongestFirst },
    projects: [
      // Files that hold process-wide state of their own (the local scenario's Lambda modules, netlink and
      // iptables choices, mocks, environment variables, fake timers, VMs): a fresh process each.
      { extends: true, test: { name: 'isolated', include: ISOLATED } },
      // The rest share their worker's process and module cache: each file's start-up (~2 s of imports, the
      // AWS SDK and CDK among them) is paid once a worker instead of once a file.
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: [...ISOLATED, 'test/vm/guest/**', ...CLUSTER],
          isolate: false,
        },
      },
    ],
  },
});
