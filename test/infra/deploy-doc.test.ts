import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTEXT_KEYS } from '../../infra/construct/app-context.js';
import { citationProblems, codeBlocks, knownNames, ROOT } from './support/doc-citations.js';

const known = knownNames();
const DOCS = join(ROOT, 'docs');
const deploy = readFileSync(join(DOCS, 'DEPLOY.md'), 'utf8');

describe('docs/DEPLOY.md cites only what the code defines', () => {
  it('every npm script, CLI command and flag, context key, ConfigMap key, object name and link exists', () => {
    expect(citationProblems(deploy, known, { docDir: DOCS, deployDoc: true })).toEqual([]);
  });

  it('lists every context key the app reads in its table', () => {
    const table = new Set(
      [...deploy.matchAll(/^\| (`[^|]+)\|/gm)].flatMap((r) => [...r[1]!.matchAll(/`(\w+)`/g)].map((k) => k[1]!)),
    );
    expect(CONTEXT_KEYS.filter((k) => !table.has(k))).toEqual([]);
  });

  it('walks the new user through every step of the path', () => {
    const commands = codeBlocks(deploy)
      .map((b) => b.text)
      .join('\n');
    for (const step of [
      '--no-bootstrap-self-managed-addons',
      'npm run image',
      'npm run -s push-image --',
      '-c nodeImageUri=',
      'npm run -s daemonset --',
      'kubectl -n kube-system rollout status daemonset/vpc-lease-cni',
      'vpc-lease max-pods',
      'kubectl get pods -o wide',
    ])
      expect(commands, step).toContain(step);
    expect(commands).not.toMatch(/docker (load|push|build)/);
  });
});

/** What .gitignore keeps out of the repository: build outputs and installed packages. */
const UNTRACKED = new Set(['node_modules', 'dist', 'cdk.out', 'build']);

describe("README.md's folder table", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Where each part lives')) ?? '';
  const listed = new Set(
    [...section.matchAll(/^\| ([^|]+)\|/gm)].flatMap((row) =>
      [...row[1]!.matchAll(/`([\w./-]+\/)`/g)].map((m) => m[1]!),
    ),
  );
  const folders = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true })
      .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !UNTRACKED.has(e.name))
      .map((e) => `${dir}${e.name}/`);

  it('names every top-level folder and every folder of shared/, so a newcomer finds each part', () => {
    // A top-level folder is named by itself or by the rows of its folders (shared/ is, folder by folder).
    const named = (f: string): boolean => [...listed].some((l) => l.startsWith(f));
    expect([...folders(''), ...folders('shared/')].filter((f) => !named(f))).toEqual([]);
  });
});

/**
 * The README, every page under docs/ and the suites' pages the README sends a reader to. Not cli/README.md or
 * local-cloud/START.md: they quote usage lines and printed errors in their code blocks, which are not commands.
 */
const GUIDES = [
  'README.md',
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith('.md') && f !== 'DEPLOY.md')
    .map((f) => join('docs', f)),
  'node/README.md',
  'local-cloud/README.md',
  'shared/lifecycle/README.md',
  'test/fabric/README.md',
  'test/security/README.md',
  'test/tools/README.md',
];

describe('the guides cite only what the code defines', () => {
  it('covers the pages under docs/ that the README links', () => {
    expect(GUIDES).toEqual(expect.arrayContaining(['docs/DESIGN.md', 'docs/OPERATIONS.md', 'docs/PERFORMANCE.md']));
  });

  it.each(GUIDES)('%s: its commands and links', (page) => {
    const path = join(ROOT, page);
    expect(citationProblems(readFileSync(path, 'utf8'), known, { docDir: dirname(path), deployDoc: false })).toEqual(
      [],
    );
  });
});

describe('Function: citationProblems (negative controls)', () => {
  const doc = [
    '```sh',
    'npm run -s push-imag -- r.example/x:1',
    'npm run -s push-image -- r.example/x:1 --archiv f.tar',
    'npx cdk deploy VpcLease -c clusterName=a -c ipvlanMode=l3 \\',
    '  -c nodeImageURI=x',
    'kubectl -n kube-system rollout status daemonset/vpc-lease',
    'kubectl -n kube-system get configmap vpc-lease -o yaml',
    'vpc-lease --region eu-west-1 nodez',
    'TABLE=x npx vpc-lease --table "$TABLE" nods',
    'vpc-lease max-pods m5.large --prefix-delegations',
    'vpc-lease-cni instal --bin-dir /x',
    'vpc-lease-cni install --allow-every-cni',
    '```',
    '```yaml',
    'data:',
    '  service-cidr: "10.0.0.0/16"',
    '  config.json: |',
    '    {',
    '      "tableNam": "t"',
    '    }',
    '```',
    '| `nodeImageTarball` | none | gone |',
    'See [the design](NOWHERE.md) and `--allow-nothing`, `shared/lease-store/nowhere.ts` and `guest/nowhere.ts`.',
  ].join('\n');

  it('reports each wrong name once, by kind', () => {
    const problems = citationProblems(doc, known, { docDir: DOCS, deployDoc: true }).map((p) =>
      p.replace(/ \(.*\)$/, ''),
    );
    expect(problems).toEqual([
      'npm script: push-imag',
      'push-image flag: --archiv',
      'context key: ipvlanMode',
      'context key: nodeImageURI',
      'Kubernetes object: daemonset/vpc-lease',
      'Kubernetes object: configmap/vpc-lease',
      'vpc-lease command: nodez',
      'vpc-lease command: nods',
      'vpc-lease max-pods option: --prefix-delegations',
      'vpc-lease-cni subcommand: instal',
      'vpc-lease-cni install flag: --allow-every-cni',
      'ConfigMap key: service-cidr',
      'config.json field: tableNam',
      'flag: --allow-nothing',
      'context key (table): nodeImageTarball',
      'link: NOWHERE.md',
      'path: shared/lease-store/nowhere.ts',
      'path: guest/nowhere.ts',
    ]);
  });
});
