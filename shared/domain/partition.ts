/**
 * AWS partitions and the Regions each holds, as the AWS SDK's `partitions.json` lists them
 * (`@aws-sdk/core` util-endpoints; a test keeps this table equal to it). ARNs, IAM's `ec2:SourceInstanceARN`
 * and service endpoints all differ per partition, so a node must know which one it is in.
 */
export interface PartitionInfo {
  readonly id: string;
  readonly regionPattern: RegExp;
  readonly dnsSuffix: string;
}

export const PARTITIONS: readonly PartitionInfo[] = [
  { id: 'aws', regionPattern: /^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$/, dnsSuffix: 'amazonaws.com' },
  { id: 'aws-cn', regionPattern: /^cn-\w+-\d+$/, dnsSuffix: 'amazonaws.com.cn' },
  { id: 'aws-us-gov', regionPattern: /^us-gov-\w+-\d+$/, dnsSuffix: 'amazonaws.com' },
  { id: 'aws-iso', regionPattern: /^us-iso-\w+-\d+$/, dnsSuffix: 'c2s.ic.gov' },
  { id: 'aws-iso-b', regionPattern: /^us-isob-\w+-\d+$/, dnsSuffix: 'sc2s.sgov.gov' },
  { id: 'aws-iso-e', regionPattern: /^eu-isoe-\w+-\d+$/, dnsSuffix: 'cloud.adc-e.uk' },
  { id: 'aws-iso-f', regionPattern: /^us-isof-\w+-\d+$/, dnsSuffix: 'csp.hci.ic.gov' },
  { id: 'aws-eusc', regionPattern: /^eusc-de-\w+-\d+$/, dnsSuffix: 'amazonaws.eu' },
];

/** The partition a Region belongs to, or undefined for a name no partition's pattern takes. */
export function partitionOfRegion(region: string): PartitionInfo | undefined {
  return PARTITIONS.find((p) => p.regionPattern.test(region));
}

export function isPartition(id: string): boolean {
  return PARTITIONS.some((p) => p.id === id);
}

/** The DNS suffix of the Region's partition (`amazonaws.com` for a Region no pattern takes). */
export function dnsSuffixOfRegion(region: string): string {
  return partitionOfRegion(region)?.dnsSuffix ?? 'amazonaws.com';
}

/** The partition id of a Region the caller knows to be real (a simulated or configured one). */
export function partitionIdOfRegion(region: string): string {
  const partition = partitionOfRegion(region);
  if (!partition)
    throw new Error(`failed to tell the partition of region ${JSON.stringify(region)}: no partition takes it`);
  return partition.id;
}
