import { describe, expect, it } from 'vitest';
import {
  describeEnisInput,
  describeSubnetsInput,
  eniFilters,
  FILTER_VALUES_MAX,
  idFilterBatches,
  pages,
} from '../../shared/ec2/sdk-describe.js';

describe('Function: idFilterBatches', () => {
  it('sends no filter for no ids, since an empty id filter would describe the whole account', () => {
    expect(idFilterBatches('network-interface-id', [])).toEqual([]);
  });

  it('drops repeated ids and cuts the rest into batches of at most 200 values', () => {
    const ids = Array.from({ length: 450 }, (_, i) => `i-${i.toString(16).padStart(17, '0')}`);
    const batches = idFilterBatches('instance-id', [...ids, ids[0] as string, ids[449] as string]);
    expect(batches.map((b) => b.Values?.length)).toEqual([FILTER_VALUES_MAX, FILTER_VALUES_MAX, 50]);
    expect(batches.every((b) => b.Name === 'instance-id')).toBe(true);
    expect(batches.flatMap((b) => b.Values)).toEqual(ids);
  });
});

describe('Function: pages', () => {
  it('follows NextToken until EC2 gives none, asking with each token once', async () => {
    const asked: (string | undefined)[] = [];
    const answers: Record<string, { n: number; NextToken?: string }> = {
      first: { n: 1, NextToken: 't2' },
      t2: { n: 2, NextToken: 't3' },
      t3: { n: 3 },
    };
    const seen: number[] = [];
    for await (const page of pages(async (token) => {
      asked.push(token);
      return answers[token ?? 'first'] as { n: number; NextToken?: string };
    }))
      seen.push(page.n);
    expect(seen).toEqual([1, 2, 3]);
    expect(asked).toEqual([undefined, 't2', 't3']);
  });
});

describe('Function: describe inputs', () => {
  it('pages an ENI query by filter but never sends MaxResults beside an id list (EC2 refuses it)', () => {
    const filters = eniFilters({ attachedTo: 'i-0123456789abcdef0', tags: { cluster: 'c1' } });
    expect(filters).toEqual([
      { Name: 'tag:cluster', Values: ['c1'] },
      { Name: 'attachment.instance-id', Values: ['i-0123456789abcdef0'] },
    ]);
    expect(describeEnisInput(filters, undefined, 'tok')).toEqual({
      Filters: filters,
      MaxResults: 1000,
      NextToken: 'tok',
    });
    expect(describeEnisInput([], ['eni-1'], undefined)).toEqual({ NetworkInterfaceIds: ['eni-1'] });
  });

  it('leaves out what the query does not name', () => {
    expect(describeSubnetsInput({}, [], undefined)).toEqual({});
    expect(describeSubnetsInput({ subnetIds: ['subnet-1'] }, [], 'tok')).toEqual({
      SubnetIds: ['subnet-1'],
      NextToken: 'tok',
    });
  });
});
