import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTEXT_KEYS } from '../../infra/construct/app-context.js';
import { citationProblems, codeBlocks, knownNames, ROOT } from './support/doc-citations.js';

const known = knownNames();
const INFRA = join(ROOT, 'docs');
const deploy = readFileSync(join(INFRA, 'DEPLOY.md'), 'utf8');

describe('docs/DEPLOY.md cites only what the code defines', () => {
  it('every npm script, CLI command and flag, context key, ConfigMap key, object name and link exists', () => {
    expect(citationProblems(deploy, known, { docDir: INFRA, deployDoc: true })).toEqual([]);
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

describe('README.md cites only what the code defines', () => {
  it('in its commands and links', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(citationProblems(readme, known, { docDir: ROOT, deployDoc: false })).toEqual([]);
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
    'See [the design](NOWHERE.md) and `--allow-nothing`.',
  ].join('\n');

  it('reports each wrong name once, by kind', () => {
    const problems = citationProblems(doc, known, { docDir: INFRA, deployDoc: true }).map((p) =>
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
    ]);
  });
});
