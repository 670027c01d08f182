import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { GLOBAL_OPTION_NAMES } from '../../../cli/args.js';
import { COMMANDS } from '../../../cli/cli.js';
import { CONTEXT_KEYS } from '../../../infra/construct/app-context.js';
import { netconfSchema } from '../../../node/config/netconf.js';
import { DAEMONSET_FILE } from '../../../packaging/image/render-daemonset.js';
import { parseManifest } from './manifest.js';

export const ROOT = resolve(dirname(DAEMONSET_FILE), '..', '..');

/** What the code defines, read from the code itself: the names a document may cite. */
export interface KnownNames {
  readonly npmScripts: ReadonlySet<string>;
  readonly contextKeys: ReadonlySet<string>;
  /** vpc-lease's commands and the options each takes (global options included). */
  readonly cliCommands: ReadonlyMap<string, ReadonlySet<string>>;
  /** vpc-lease-cni's subcommands (node/cli.ts dispatches on them). */
  readonly nodeSubcommands: ReadonlySet<string>;
  /** Every `--flag` the node executable's sources name. */
  readonly nodeFlags: ReadonlySet<string>;
  readonly pushImageFlags: ReadonlySet<string>;
  /** `kind/name` of the objects node/deploy/daemonset.yaml creates, lower-case kinds. */
  readonly k8sObjects: ReadonlySet<string>;
  readonly configMapKeys: ReadonlySet<string>;
  readonly netconfFields: ReadonlySet<string>;
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'native' ? [] : sourcesUnder(path);
    return path.endsWith('.ts') ? [readFileSync(path, 'utf8')] : [];
  });
}

export function knownNames(): KnownNames {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const objects = parseManifest(readFileSync(DAEMONSET_FILE, 'utf8'));
  const configMap = objects.find((o) => o.kind === 'ConfigMap') as { data?: Record<string, string> } | undefined;
  const nodeSources = sourcesUnder(join(ROOT, 'node')).join('\n');
  const nodeCli = readFileSync(join(ROOT, 'node', 'cli.ts'), 'utf8');
  const pushSource = readFileSync(join(ROOT, 'packaging', 'image', 'push.ts'), 'utf8');
  return {
    npmScripts: new Set(Object.keys(pkg.scripts)),
    contextKeys: new Set(CONTEXT_KEYS),
    cliCommands: new Map(COMMANDS.map((c) => [c.name, new Set<string>([...c.options, ...GLOBAL_OPTION_NAMES])])),
    nodeSubcommands: new Set([...nodeCli.matchAll(/args\[0\] === '([\w-]+)'/g)].map((m) => m[1]!)),
    // A flag is known when the sources spell it as an option (`'--x'`, `--x` in a usage) or a parsed name (`'x'`).
    nodeFlags: new Set(
      [...nodeSources.matchAll(/--([a-z][a-z0-9-]+)|'([a-z][a-z0-9]*(?:-[a-z0-9]+)+)'/g)].map((m) => m[1] ?? m[2]!),
    ),
    pushImageFlags: new Set([...pushSource.matchAll(/arg === '--([a-z-]+)'/g)].map((m) => m[1]!)),
    k8sObjects: new Set(objects.map((o) => `${o.kind.toLowerCase()}/${o.metadata.name}`)),
    configMapKeys: new Set(Object.keys(configMap?.data ?? {})),
    netconfFields: new Set(Object.keys(netconfSchema)),
  };
}

/** The fenced blocks of a Markdown text, by language, with shell line continuations joined. */
export function codeBlocks(markdown: string): { lang: string; text: string }[] {
  return [...markdown.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)].map((m) => ({
    lang: m[1]!,
    text: m[2]!.replace(/\\\n\s*/g, ' '),
  }));
}

/** Shell commands: one per line, comments dropped, split at `&&`, `||`, `|`, `;` and `$(`. */
function shellCommands(text: string): string[][] {
  return text
    .split('\n')
    .map((line) => line.replace(/(^|\s)#.*$/, ''))
    .flatMap((line) => line.split(/&&|\|\||\||;|\$\(/))
    .map((cmd) =>
      cmd
        .replace(/\)\s*$/, '')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map((t) => t.replace(/^["']|["')]+$/g, '')),
    )
    .map((tokens) =>
      tokens.slice(
        Math.max(
          0,
          tokens.findIndex((t) => !/^\w+=/.test(t)),
        ),
      ),
    )
    .filter((tokens) => tokens.length > 0);
}

const CLI_VALUED = new Set([
  'region',
  'table',
  'cluster',
  'local-dir',
  'instance',
  'state',
  'dlq',
  'max-pods-cap',
  'time-scale',
]);

export interface CitationOptions {
  /** Relative links resolve from here. */
  readonly docDir: string;
  /** Its first-column tables are context keys, and a lone `--flag` in a code span is the CLI's or the node's. */
  readonly deployDoc: boolean;
}

/** Every name the document cites that the code does not define, as `what: name (where)`. */
export function citationProblems(markdown: string, known: KnownNames, options: CitationOptions): string[] {
  const problems: string[] = [];
  const blocks = codeBlocks(markdown);
  for (const { text } of blocks.filter((b) => b.lang === 'sh' || b.lang === '')) {
    for (const tokens of shellCommands(text)) {
      const line = tokens.join(' ');
      const head = tokens[0] === 'npx' ? tokens[1] : tokens[0];
      if (head === 'npm' && tokens[1] === 'run') {
        const rest = tokens.slice(2).filter((t) => t !== '-s' && t !== '--silent');
        if (!known.npmScripts.has(rest[0] ?? '')) problems.push(`npm script: ${rest[0]} (${line})`);
        if (rest[0] === 'push-image')
          for (const t of rest.slice(1).filter((t) => t.startsWith('--') && t !== '--'))
            if (!known.pushImageFlags.has(t.slice(2))) problems.push(`push-image flag: ${t} (${line})`);
      }
      if (tokens.includes('cdk') || tokens.includes('synth'))
        for (let i = 0; i < tokens.length - 1; i++)
          if (tokens[i] === '-c') {
            const key = tokens[i + 1]!.split('=')[0]!;
            if (!known.contextKeys.has(key)) problems.push(`context key: ${key} (${line})`);
          }
      if (head === 'vpc-lease') {
        let i = tokens.indexOf('vpc-lease') + 1;
        const flags: string[] = [];
        while (tokens[i]?.startsWith('--')) {
          flags.push(tokens[i]!.slice(2));
          i += CLI_VALUED.has(tokens[i]!.slice(2)) ? 2 : 1;
        }
        const command = tokens[i] ?? '';
        const options = known.cliCommands.get(command);
        if (!options) problems.push(`vpc-lease command: ${command} (${line})`);
        else
          for (const f of [
            ...flags,
            ...tokens
              .slice(i + 1)
              .filter((t) => t.startsWith('--'))
              .map((t) => t.slice(2)),
          ])
            if (!options.has(f.split('=')[0]!)) problems.push(`vpc-lease ${command} option: --${f} (${line})`);
      }
      if (head === 'vpc-lease-cni') problems.push(...nodeCommandProblems(tokens.slice(1), known, line));
      if (head === 'kubectl') {
        for (const t of tokens.filter((t) => /^(daemonset|configmap|ds|cm)\//.test(t)))
          if (!known.k8sObjects.has(t.replace(/^ds\//, 'daemonset/').replace(/^cm\//, 'configmap/')))
            problems.push(`Kubernetes object: ${t} (${line})`);
        const kind = tokens.findIndex((t) => t === 'configmap' || t === 'daemonset');
        if (kind >= 0 && tokens[kind + 1] && !tokens[kind + 1]!.startsWith('-'))
          if (!known.k8sObjects.has(`${tokens[kind]}/${tokens[kind + 1]}`))
            problems.push(`Kubernetes object: ${tokens[kind]}/${tokens[kind + 1]} (${line})`);
      }
    }
  }
  for (const { text } of blocks.filter((b) => b.lang === 'yaml' && /^data:/m.test(b.text))) {
    const data = text.split(/^data:\n/m)[1] ?? '';
    for (const m of data.matchAll(/^ {2}([\w.-]+):/gm))
      if (!known.configMapKeys.has(m[1]!)) problems.push(`ConfigMap key: ${m[1]}`);
    const json = /config\.json: \|\n([\s\S]*)$/.exec(data)?.[1];
    if (json)
      for (const m of json.matchAll(/^\s+"(\w+)":/gm))
        if (!known.netconfFields.has(m[1]!)) problems.push(`config.json field: ${m[1]}`);
  }
  // Inline citations: a command in a code span, and the context-key table's first column.
  for (const m of markdown.matchAll(/`((?:npm run|vpc-lease-cni|vpc-lease) [^`]+)`/g))
    problems.push(...citationProblems(`\`\`\`sh\n${m[1]!.replace(/<[^>]*>/g, 'X')}\n\`\`\`\n`, known, options));
  if (options.deployDoc) problems.push(...deployDocProblems(markdown, known));
  for (const link of markdown.matchAll(/\]\(((?!https?:|#)[^)#\s]+)/g))
    problems.push(...linkProblem(options.docDir, link[1]!));
  for (const m of markdown.matchAll(/`([\w.-]+(?:\/[\w.-]+)*\/?)`/g))
    problems.push(...pathProblem(options.docDir, m[1]!));
  return problems;
}

const TOP_LEVEL = /^(shared|lambdas|node|infra|local-cloud|cli|packaging|docs|test)\//;

/**
 * A file or folder of this repository named in a code span: one under a top-level folder resolves from the
 * root, a relative source or page (`x/y.ts`) from the document's folder or the root. Build and test outputs
 * (`dist/`, `.test-results/`) and paths on a node (`/etc/…`) are neither.
 */
function pathProblem(docDir: string, token: string): string[] {
  const relative = /^\w/.test(token) && token.includes('/') && /\.(ts|md|json|py)$/.test(token);
  if (!TOP_LEVEL.test(token) && !relative) return [];
  if (existsSync(resolve(ROOT, token)) || (!TOP_LEVEL.test(token) && existsSync(resolve(docDir, token)))) return [];
  return [`path: ${token}`];
}

function deployDocProblems(markdown: string, known: KnownNames): string[] {
  const problems: string[] = [];
  for (const m of markdown.matchAll(/`(--[a-z][a-z-]+)`/g))
    if (!known.nodeFlags.has(m[1]!.slice(2)) && ![...known.cliCommands.values()].some((o) => o.has(m[1]!.slice(2))))
      problems.push(`flag: ${m[1]}`);
  for (const row of markdown.matchAll(/^\| (`[^|]+)\|/gm))
    for (const key of row[1]!.matchAll(/`(\w+)`/g))
      if (!known.contextKeys.has(key[1]!)) problems.push(`context key (table): ${key[1]}`);
  return problems;
}

function nodeCommandProblems(args: string[], known: KnownNames, line: string): string[] {
  const sub = args[0] ?? '';
  if (!known.nodeSubcommands.has(sub)) return [`vpc-lease-cni subcommand: ${sub} (${line})`];
  return args
    .slice(1)
    .filter((t) => t.startsWith('--'))
    .map((t) => t.slice(2).split('=')[0]!)
    .filter((f) => !known.nodeFlags.has(f))
    .map((f) => `vpc-lease-cni ${sub} flag: --${f} (${line})`);
}

/** Relative links resolve from the document's folder. */
function linkProblem(docDir: string, target: string): string[] {
  try {
    statSync(resolve(docDir, target));
    return [];
  } catch {
    return [`link: ${target}`];
  }
}
