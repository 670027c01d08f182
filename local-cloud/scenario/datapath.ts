import { dirname, join } from 'node:path';
import { SHIM_BUILD_FILE } from '../../packaging/shim.js';
import type { IpFamilySetting } from '../../shared/domain/node.js';
import { LightDynamoClient } from '../../shared/dynamo/light-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LocalCloud } from '../cloud.js';
import { CniPods } from './cni-pods.js';
import { type HostNet, probeHostNet } from './host-net.js';
import { LeaseStorePods, type PodDriver } from './pods.js';

export interface DatapathChoice {
  readonly driver: PodDriver;
  /** Why the CNI datapath does not run; null when it does. */
  readonly reason: string | null;
}

export interface DatapathInput {
  readonly cloud: LocalCloud;
  readonly hostNet: HostNet;
  readonly tableName: string;
  readonly localDir: string;
  readonly reuseWaitMs: number;
  readonly controlPlaneOnly: boolean;
  /** Pods of another family than ipv4 claim on the store: the local host network routes IPv4 only. */
  readonly ipFamily?: IpFamilySetting;
  readonly say: (line: string) => void;
}

/**
 * The real plugin in real namespaces when this process may make them and the binary builds; otherwise the
 * control plane alone, saying why. The binary is built into the local folder (a fresh clone has no dist/).
 */
export async function chooseDatapath(input: DatapathInput): Promise<DatapathChoice> {
  const { cloud, hostNet, say } = input;
  let reason: string | null = null;
  const capability = probeHostNet();
  const family = input.ipFamily ?? 'ipv4';
  if (input.controlPlaneOnly) reason = 'asked for --control-plane-only';
  else if (family !== 'ipv4') reason = `--ip-family ${family}: the local host network routes IPv4 pods only`;
  else if (!capability.ok) reason = capability.reason ?? 'no network namespaces';
  let binary: string | undefined;
  if (!reason) {
    try {
      const { buildCni } = await import('../../packaging/build.js');
      binary = await buildCni(join(input.localDir, 'cni'));
    } catch (err) {
      reason = `the CNI binary did not build: ${(err as Error).message}`;
    }
  }
  if (!binary || reason) {
    say(`pods: control plane only — ${reason}; pods claim and release leases on the store, no datapath`);
    // The plugin's own client, signed with the instance's role session, at the enforcing endpoint.
    const storeFor = (instanceId: string) =>
      new DynamoLeaseStore({
        api: new LightDynamoClient({
          endpoint: cloud.endpoints.dynamodb,
          region: cloud.region,
          credentials: async () => cloud.nodeSession(instanceId).credentials,
        }),
        tableName: input.tableName,
      });
    return {
      driver: new LeaseStorePods(storeFor, cloud.region, cloud.accountId, input.reuseWaitMs, family),
      reason,
    };
  }
  hostNet.startReaper(input.localDir);
  await hostNet.detectLinkKind();
  const workDir = join(input.localDir, 'nodes');
  CniPods.resetWorkDir(workDir);
  const stand = hostNet.linkKind === 'macvlan' ? ' (standing in for ipvlan, which this kernel does not have)' : '';
  say(
    `pods: real CNI binary ${binary} in network namespaces, called through its shim and an agent per node; pod links are ${hostNet.linkKind}${stand}`,
  );
  return {
    driver: new CniPods({
      binary,
      cloud,
      hostNet,
      tableName: input.tableName,
      workDir,
      reuseWaitMs: input.reuseWaitMs,
      shim: join(dirname(binary), SHIM_BUILD_FILE),
    }),
    reason: null,
  };
}
