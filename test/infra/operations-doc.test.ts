import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TABLE_NAME } from '../../local-cloud/scenario/run.js';
import { isClaimable, type Lease } from '../../shared/domain/lease.js';
import { A, HOLDER_ATTRS, NODE_WRITABLE_ATTRS } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX, NODE_INDEX } from '../../shared/lease-store/table.js';
import { CliFixture } from '../cli/support.js';
import { missing } from '../support/capabilities.js';
import { ROOT } from './support/doc-citations.js';

/**
 * docs/OPERATIONS.md's queries, taken from its code blocks and run as written by bash, with `aws` carried out
 * by Debian's boto3 (support/aws-boto3.py), against the local cloud's DynamoDB after a real launch of two nodes.
 */
const DOC = readFileSync(join(ROOT, 'docs', 'OPERATIONS.md'), 'utf8');
const PYTHON = '/usr/bin/python3';
const skip = missing('boto3');

interface DocQuery {
  readonly title: string;
  /** The AWS CLI form (query, scan, get-item). */
  readonly cli: string;
  /** The PartiQL form (execute-statement). */
  readonly partiql: string;
}

/** Every `### title` section's `aws dynamodb` blocks, raw (bash joins the continuations). */
function docQueries(markdown: string): DocQuery[] {
  return markdown
    .split(/^### /m)
    .slice(1)
    .map((section) => {
      const title = section.slice(0, section.indexOf('\n')).trim();
      const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```/gm)]
        .map((m) => m[1]!)
        .filter((b) => b.startsWith('aws dynamodb '));
      const partiql = blocks.filter((b) => b.includes('execute-statement'));
      const cli = blocks.filter((b) => !b.includes('execute-statement'));
      if (cli.length !== 1 || partiql.length !== 1)
        throw new Error(`"${title}": expected one AWS CLI query and one PartiQL statement, found ${blocks.length}`);
      return { title, cli: cli[0]!, partiql: partiql[0]! };
    });
}

/** The variables the page tells the operator to set (its block of `NAME=value` lines). */
function docVariables(markdown: string): Set<string> {
  const block = [...markdown.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => m[1]!).find((b) => /^[A-Z]+=/.test(b));
  return new Set([...(block ?? '').matchAll(/(?:^|\s)([A-Z]+)=/g)].map((m) => m[1]!));
}

/** The names in the first column of the page's tables (`` `sn`, `cidr`, `gw` `` is three). */
function documentedAttributes(markdown: string): Set<string> {
  return new Set(
    [...markdown.matchAll(/^\| ([^|]*`[^|]*)\|/gm)].flatMap((row) =>
      [...row[1]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!),
    ),
  );
}

describe('docs/OPERATIONS.md explains the items as the codec writes them', () => {
  it('has a row for every attribute name of the codec, and none for a name it lacks', () => {
    const documented = documentedAttributes(DOC);
    const codec = new Set<string>(Object.values(A));
    expect([...codec].filter((a) => !documented.has(a))).toEqual([]);
    expect([...documented].filter((a) => !codec.has(a))).toEqual([]);
  });

  it("names the indexes, the node index's projection and the node-writable attributes as the table defines them", () => {
    expect(DOC).toContain(`**\`${CLAIMABLE_INDEX.name}\`**`);
    expect(DOC).toContain(`**\`${NODE_INDEX.name}\`**`);
    const projected = /projecting ([^.]*)\./.exec(DOC)?.[1] ?? '';
    expect([...projected.matchAll(/`(\w+)`/g)].map((m) => m[1]!)).toEqual([...NODE_INDEX.projected]);
    const writable = /A node's credentials can write only ([^(]*)\(/.exec(DOC)?.[1] ?? '';
    const named = new Set([...writable.matchAll(/`(\w+)`/g)].map((m) => m[1]!));
    if (writable.includes('the holder attributes')) for (const h of HOLDER_ATTRS) named.add(h);
    const keys = new Set<string>([A.pk, A.sk]);
    expect([...named].sort()).toEqual(NODE_WRITABLE_ATTRS.filter((a) => !keys.has(a)).sort());
  });
});

/** The attributes a condition names: `pk = :node AND begins_with(sk, :ip)` and `WHERE pk = '…'` alike. */
function conditionAttributes(condition: string): string[] {
  const names = [...condition.matchAll(/begins_with\((\w+)|\b([a-zA-Z]\w*)\s*(?:=|<=|>=|<|>|IN\b)/g)];
  return [...new Set(names.map((m) => m[1] ?? m[2]!))].sort();
}

/** What the AWS CLI form selects on and returns: its key or expression's attributes, its `--query` fields. */
function cliShape(cli: string): { where: string[]; returned: string[] } {
  const condition = /--(?:key-condition|filter)-expression '([^']*)'/.exec(cli)?.[1];
  const key = /--key (\S+)/.exec(cli)?.[1];
  const where = condition
    ? conditionAttributes(condition)
    : [...(key ?? '').matchAll(/"(\w+)":\{"S"/g)].map((m) => m[1]!);
  const query = /--query '([^']*)'/.exec(cli)?.[1] ?? '';
  return { where: [...where].sort(), returned: [...query.matchAll(/(\w+)\.[SNLM]\b/g)].map((m) => m[1]!) };
}

describe('docs/OPERATIONS.md: each PartiQL form asks what the AWS CLI form above it asks', () => {
  // dynalite cannot run them (below), so this is what holds them to the tested forms: the same attributes in
  // the condition, and a SELECT of the attributes the CLI form's --query returns.
  it.each(docQueries(DOC).map((q) => [q.title, q] as const))('%s', (_title, q) => {
    const statement = /--statement "((?:[^"\\]|\\.)*)"/.exec(q.partiql)?.[1] ?? '';
    const [, columns = '', where = ''] = /^SELECT (.*?) FROM \S+ WHERE (.*)$/.exec(statement) ?? [];
    const cli = cliShape(q.cli);
    expect(cli.where.length).toBeGreaterThan(0);
    expect(conditionAttributes(where)).toEqual(cli.where);
    const selected = columns.split(/,\s*/);
    expect(selected.length).toBeGreaterThan(0);
    expect(selected.filter((c) => !cli.returned.includes(c))).toEqual([]);
    expect(q.partiql.includes('--consistent-read')).toBe(q.cli.includes('--consistent-read'));
    if (q.cli.includes('--index-name')) expect(statement).toMatch(/FROM \\"\$TABLE\\"\.\\"claimable\\"/);
  });
});

describe.skipIf(skip)('docs/OPERATIONS.md: its queries through boto3 on the local cloud', () => {
  let fixture: CliFixture;
  let bin: string;
  let vars: Record<string, string>;
  let nodeArn: string;
  let leases: Lease[];
  let nowMs: number;
  const queries = docQueries(DOC);

  beforeAll(async () => {
    // Prepare: two nodes launched through the hooks and the real lifecycle handler, then a pod's claim, a DEL
    // (COOLDOWN) and the pool's RELEASING mark on the first node, through the lease store's own writes.
    fixture = await CliFixture.start(2);
    nodeArn = fixture.arnOf(fixture.instanceIds[0]!);
    const free = await fixture.store.listLeases(nodeArn, { state: 'FREE' });
    nowMs = Date.now();
    const web = await fixture.store.claim(
      nodeArn,
      {
        containerId: 'c-web',
        ifName: 'eth0',
        netns: '/var/run/netns/web',
        podNamespace: 'shop',
        podName: 'web-1',
        network: 'vpc-lease',
      },
      nowMs,
    );
    const dns = await fixture.store.claim(
      nodeArn,
      {
        containerId: 'c-dns',
        ifName: 'eth0',
        netns: '/var/run/netns/dns',
        podNamespace: 'kube-system',
        podName: 'dns-1',
      },
      nowMs,
    );
    await fixture.store.release(nodeArn, { containerId: 'c-dns', ifName: 'eth0' }, nowMs, 30_000, dns.ip);
    const stillFree = free.find((l) => l.ip !== web.ip && l.ip !== dns.ip)!;
    await fixture.store.markReleasing(nodeArn, stillFree.ip, nowMs, nowMs);
    leases = await fixture.store.listLeases(nodeArn);

    bin = mkdtempSync(join(tmpdir(), 'vpc-lease-aws-'));
    writeFileSync(
      join(bin, 'aws'),
      `#!/bin/sh\nexec ${PYTHON} ${join(import.meta.dirname, 'support', 'aws-boto3.py')} "$@"\n`,
    );
    chmodSync(join(bin, 'aws'), 0o755);
    vars = { TABLE: TABLE_NAME, NODE: nodeArn, ADDRESS: web.ip, NAMESPACE: 'shop', POD: 'web-1' };
  }, 120_000);

  afterAll(async () => {
    await fixture?.close();
    if (bin) rmSync(bin, { recursive: true, force: true });
  });

  /**
   * Runs one block as the page shows it; `aws` is the boto3 stand-in. Asynchronously: the local cloud's
   * endpoints answer from this process, so a synchronous child would wait on them forever.
   */
  async function run(block: string): Promise<{ code: number; out: unknown; err: string }> {
    const child = spawn('bash', ['-c', `set -eu\n${block}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: `${bin}:${process.env['PATH']}`,
        AWS_ENDPOINT_URL_DYNAMODB: fixture.cloud.endpoints.dynamodb,
        AWS_REGION: fixture.cloud.region,
        AWS_DEFAULT_REGION: fixture.cloud.region,
        AWS_ACCESS_KEY_ID: 'local',
        AWS_SECRET_ACCESS_KEY: 'local',
        // One attempt: a refused or wrong query answers at once instead of after boto3's retries.
        AWS_MAX_ATTEMPTS: '1',
        ...vars,
      },
    });
    let stdout = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    const [code] = (await once(child, 'close')) as [number | null];
    let out: unknown;
    try {
      out = JSON.parse(stdout);
    } catch {
      out = stdout;
    }
    return { code: code ?? -1, out, err };
  }

  /** Rows in one order whatever order the query returned them in (a Scan's is the table's hash order). */
  const sorted = (rows: unknown): unknown[] =>
    [...(rows as unknown[])].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

  /** What each query must answer, from the lease store's own reads (our SDK client, not boto3). */
  const expected: Record<string, () => unknown> = {
    "A node's leases": () =>
      sorted(
        leases.map((l) => [`ip#${l.ip}`, l.state, l.eniId, l.holder?.podNamespace ?? null, l.holder?.podName ?? null]),
      ),
    "A node's item: phase, ENIs, refusals": () => expect.objectContaining({ phase: 'READY', failure: null }),
    "What a node's pods could claim now": () =>
      sorted(leases.filter((l) => isClaimable(l, nowMs)).map((l) => [`ip#${l.ip}`, l.state])),
    'Who holds an address': () => [[nodeArn, 'CLAIMED', 'shop', 'web-1', 'c-web']],
    "Where a pod's address lives": () => {
      const web = leases.find((l) => l.holder?.podName === 'web-1')!;
      return [[nodeArn, `ip#${web.ip}`, web.eniId, 'CLAIMED']];
    },
    'What sits in COOLDOWN or RELEASING': () =>
      sorted(
        leases
          .filter((l) => l.state === 'COOLDOWN' || l.state === 'RELEASING')
          .map((l) => [
            nodeArn,
            `ip#${l.ip}`,
            l.state,
            String(l.releasedAtMs),
            l.state === 'COOLDOWN' ? String(l.reusableAtMs) : null,
          ]),
      ),
  };

  it('has an expectation for every query on the page, and the page sets every variable they use', () => {
    expect(queries.map((q) => q.title).sort()).toEqual(Object.keys(expected).sort());
    const used = new Set(
      queries.flatMap((q) => [...`${q.cli}${q.partiql}`.matchAll(/\$([A-Z]+)\b/g)].map((m) => m[1]!)),
    );
    expect([...used].filter((v) => !docVariables(DOC).has(v))).toEqual([]);
    expect([...used].sort()).toEqual(Object.keys(vars).sort());
  });

  it.each(queries.map((q) => [q.title, q] as const))(
    '%s: the AWS CLI form answers what the store holds',
    async (title, q) => {
      const r = await run(q.cli);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      const want = expected[title]!();
      expect(Array.isArray(r.out) ? sorted(r.out) : r.out).toEqual(want);
    },
  );

  it("the node item's query names its ENIs and max-pods as the store reads them", async () => {
    const node = (await fixture.store.getNode(nodeArn))!;
    const r = await run(queries.find((q) => q.title.startsWith("A node's item"))!.cli);
    expect(r.out).toEqual({
      phase: 'READY',
      type: node.instanceType,
      maxPods: String(node.maxPods),
      failure: null,
      enis: node.enis.map((e) => ({ eni: e.eniId, step: e.step })),
    });
    expect(node.enis.length).toBeGreaterThan(0);
  });

  it('the fixture holds what the queries are about: a claim, a COOLDOWN, a RELEASING and FREE leases', () => {
    expect(new Set(leases.map((l) => l.state))).toEqual(new Set(['FREE', 'CLAIMED', 'COOLDOWN', 'RELEASING']));
  });

  // dynalite 4.0 has no ExecuteStatement. The day the local cloud answers one, this fails: then assert the
  // PartiQL forms' answers as the AWS CLI forms' are, and drop the page's sentence saying they are untested.
  it.each(queries.map((q) => [q.title, q] as const))(
    '%s: the PartiQL form is refused by dynalite',
    async (_title, q) => {
      const r = await run(q.partiql);
      expect(r.code).toBe(254);
      expect(r.err).toMatch(/ExecuteStatement/);
      expect(r.err).toMatch(/UnknownOperation|not (supported|implemented)/i);
      expect(DOC).toMatch(/dynalite 4\.0, which does not implement\s+`ExecuteStatement`/);
    },
  );
});
