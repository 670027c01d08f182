import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../cli/cli.js';
import { parseStrictToml } from './support/strict-toml.js';

// A real YAML parser: the `yaml` package aws-cdk-lib bundles (a dependency of this project).
const YAML = createRequire(new URL('../../node_modules/aws-cdk-lib/package.json', import.meta.url))('yaml') as {
  parse(text: string): unknown;
};

const DOC = new URL('../../docs/max-pods.md', import.meta.url);

interface Snippet {
  readonly kind: string;
  readonly instanceType: string;
  readonly flags: string[];
  readonly language: string;
  readonly body: string;
}

/** Each fenced block right after a `<!-- max-pods-snippet: KIND TYPE [FLAGS] -->` marker. */
function snippets(markdown: string): Snippet[] {
  const found: Snippet[] = [];
  const re = /<!-- max-pods-snippet: (\S+) (\S+)((?: --\S+(?: \d+)?)*) -->\n```(\w+)\n([\s\S]*?)\n```/g;
  for (const m of markdown.matchAll(re))
    found.push({
      kind: m[1]!,
      instanceType: m[2]!,
      flags: m[3]!.trim().split(/\s+/).filter(Boolean),
      language: m[4]!,
      body: m[5]!,
    });
  return found;
}

async function cliFigure(instanceType: string, flags: readonly string[]): Promise<number> {
  let out = '';
  const code = await runCli(['--json', 'max-pods', instanceType, ...flags], {
    out: (t) => (out += t),
    err: () => {},
    env: {},
  });
  expect(code).toBe(0);
  return (JSON.parse(out) as { maxPods: number }).maxPods;
}

function at(doc: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((node, k) => (node as Record<string, unknown> | undefined)?.[k], doc);
}

/** Where each kind keeps kubelet's max-pods, and what the document must say it is. */
const KINDS: Record<string, { language: string; parse: (t: string) => unknown; identity: object; path: string[] }> = {
  nodeadm: {
    language: 'yaml',
    parse: (t) => YAML.parse(t),
    identity: { apiVersion: 'node.eks.aws/v1alpha1', kind: 'NodeConfig' },
    path: ['spec', 'kubelet', 'config', 'maxPods'],
  },
  bottlerocket: {
    language: 'toml',
    parse: parseStrictToml,
    identity: {},
    path: ['settings', 'kubernetes', 'max-pods'],
  },
  karpenter: {
    language: 'yaml',
    parse: (t) => YAML.parse(t),
    identity: { apiVersion: 'karpenter.k8s.aws/v1', kind: 'EC2NodeClass' },
    path: ['spec', 'kubelet', 'maxPods'],
  },
};

describe('docs/max-pods.md', () => {
  const all = snippets(readFileSync(DOC, 'utf8'));

  it('has one snippet for each of AL2023 nodeadm, Bottlerocket and Karpenter', () => {
    expect(all.map((s) => s.kind).sort()).toEqual(['bottlerocket', 'karpenter', 'nodeadm']);
  });

  it.each(Object.keys(KINDS))(
    '%s: the field holds what `vpc-lease max-pods` prints for the named type',
    async (kind) => {
      const snippet = all.find((s) => s.kind === kind)!;
      const spec = KINDS[kind]!;
      expect(snippet.language).toBe(spec.language);
      const doc = spec.parse(snippet.body);
      expect(doc).toMatchObject(spec.identity);
      expect(at(doc, spec.path)).toBe(await cliFigure(snippet.instanceType, snippet.flags));
    },
  );

  it('control: the parsers refuse a wrong snippet, and a wrong figure does not match', async () => {
    expect(() => parseStrictToml('[settings.kubernetes]\nmax-pods = [20]\n')).toThrow(/unsupported value/);
    expect(() => parseStrictToml('[settings.kubernetes]\nmax-pods = 20\nmax-pods = 29\n')).toThrow(/twice/);
    expect(() => YAML.parse('spec:\n  kubelet:\n    maxPods: 20\n    maxPods: 29\n')).toThrow();
    const wrong = parseStrictToml('[settings.kubernetes]\nmax-pods = 29\n');
    expect(at(wrong, KINDS['bottlerocket']!.path)).not.toBe(await cliFigure('m5.large', []));
  });
});
