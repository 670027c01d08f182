import type {
  DescribeInstancesCommandInput,
  DescribeNetworkInterfacesCommandInput,
  DescribeSubnetsCommandInput,
  Filter,
} from '@aws-sdk/client-ec2';
import type { EniQuery, SubnetQuery } from './port.js';

/** EC2's Describe calls take at most 200 values per filter. */
export const FILTER_VALUES_MAX = 200;

/** Paginated Describe calls draw on EC2's larger token bucket; unpaginated ones are throttled harder. */
const PAGE_SIZE_MAX = 1000;

export function tagFilters(tags: Readonly<Record<string, string>> | undefined): Filter[] {
  return Object.entries(tags ?? {}).map(([k, v]) => ({ Name: `tag:${k}`, Values: [v] }));
}

export function subnetFilters(query: SubnetQuery): Filter[] {
  const filters = tagFilters(query.tags);
  if (query.vpcId) filters.push({ Name: 'vpc-id', Values: [query.vpcId] });
  if (query.availabilityZone) filters.push({ Name: 'availability-zone', Values: [query.availabilityZone] });
  return filters;
}

/** The query's filters other than its id list (`eniIds` or `filterEniIds`, which the caller sends its own way). */
export function eniFilters(query: EniQuery): Filter[] {
  const filters = tagFilters(query.tags);
  if (query.attachedTo) filters.push({ Name: 'attachment.instance-id', Values: [query.attachedTo] });
  if (query.subnetIds?.length) filters.push({ Name: 'subnet-id', Values: [...query.subnetIds] });
  return filters;
}

/**
 * One `name` filter per batch of at most FILTER_VALUES_MAX distinct ids, and none for no ids: an empty id
 * filter would describe every resource of the account.
 */
export function idFilterBatches(name: string, ids: readonly string[]): Filter[] {
  const unique = [...new Set(ids)];
  const batches: Filter[] = [];
  for (let i = 0; i < unique.length; i += FILTER_VALUES_MAX)
    batches.push({ Name: name, Values: unique.slice(i, i + FILTER_VALUES_MAX) });
  return batches;
}

export function describeSubnetsInput(
  query: SubnetQuery,
  filters: readonly Filter[],
  nextToken: string | undefined,
): DescribeSubnetsCommandInput {
  return {
    ...(query.subnetIds?.length ? { SubnetIds: [...query.subnetIds] } : {}),
    ...(filters.length ? { Filters: [...filters] } : {}),
    ...(nextToken ? { NextToken: nextToken } : {}),
  };
}

export function describeEnisInput(
  filters: readonly Filter[],
  eniIds: readonly string[] | undefined,
  nextToken: string | undefined,
): DescribeNetworkInterfacesCommandInput {
  return {
    ...(eniIds?.length ? { NetworkInterfaceIds: [...eniIds] } : {}),
    ...(filters.length ? { Filters: [...filters] } : {}),
    // EC2 refuses MaxResults beside an id list.
    ...(eniIds?.length ? {} : { MaxResults: PAGE_SIZE_MAX }),
    ...(nextToken ? { NextToken: nextToken } : {}),
  };
}

export function describeInstancesInput(idFilter: Filter, nextToken: string | undefined): DescribeInstancesCommandInput {
  return { Filters: [idFilter], MaxResults: PAGE_SIZE_MAX, ...(nextToken ? { NextToken: nextToken } : {}) };
}

/** Every page of a Describe call, following NextToken until EC2 gives none. */
export async function* pages<T extends { readonly NextToken?: string | undefined }>(
  describe: (nextToken: string | undefined) => Promise<T>,
): AsyncGenerator<T> {
  let nextToken: string | undefined;
  do {
    const page = await describe(nextToken);
    yield page;
    nextToken = page.NextToken;
  } while (nextToken);
}
