/**
 * `npm run bench -- lambdas`: what a cold start pays for each Lambda bundle. Each handler is bundled twice into
 * a scratch directory, the way the project ships it (infra/lambda-bundle.ts) and the earlier unminified CommonJS
 * way (the "before" column), and each bundle is imported by a fresh Node (this Node, the Lambdas' major) with
 * `--enable-source-maps` as the functions run, paired round by round with a bare `node -e ''`.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { type BuildOptions, build } from 'esbuild';
import { lambdaBuildOptions } from '../../infra/lambda-bundle.js';
import { machineInfo } from './machine.js';
import { ratio, round, summarize } from './stats.js';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..', '..');
const HANDLERS = ['instance-lifecycle', 'pool-manager', 'reconciler'] as const;

/** The bundle `npm run build` made before bundles were shaken: kept only as this bench's baseline. */
function unshakenOptions(entry: string, outfile: string): BuildOptions {
  const { banner } = lambdaBuildOptions(entry, outfile);
  return {
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    minifyWhitespace: true,
    minifySyntax: true,
    sourcemap: 'linked',
    legalComments: 'none',
    ...(banner ? { banner } : {}),
  };
}

// performance.now() counts from the child's own start, so the figure includes Node's boot as a cold start does.
const PROBE =
  'if (process.argv[1]) await import(process.argv[1]); ' +
  'process.stdout.write(JSON.stringify({ ms: performance.now(), maxRssKib: process.resourceUsage().maxRSS }));';

interface Sample {
  readonly ms: number;
  readonly maxRssKib: number;
}

async function probe(bundle: string | undefined): Promise<Sample> {
  const args = [
    '--enable-source-maps',
    '--input-type=module',
    '-e',
    PROBE,
    ...(bundle ? [pathToFileURL(bundle).href] : ['']),
  ];
  const { stdout } = await run(process.execPath, args, { env: { PATH: process.env['PATH'] ?? '' } });
  return JSON.parse(stdout) as Sample;
}

export async function runLambdasBench(options: { readonly rounds: number }): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-lambdas-bench-'));
  try {
    const variants = { shipped: lambdaBuildOptions, before: unshakenOptions } as const;
    const key = (name: string, variant: string): string => `${name}/${variant}`;
    const bundles = new Map<string, string>();
    for (const [variant, options] of Object.entries(variants)) {
      for (const name of HANDLERS) {
        const outfile = join(dir, variant, name, 'index.mjs');
        await build({
          ...options(join(ROOT, 'lambdas', name, 'handler.ts'), outfile),
          absWorkingDir: ROOT,
          logLevel: 'silent',
        });
        bundles.set(key(name, variant), outfile);
      }
    }
    const bare: Sample[] = [];
    const imports = new Map<string, Sample[]>([...bundles.keys()].map((k) => [k, []]));
    for (let round = 0; round < options.rounds; round++) {
      bare.push(await probe(undefined));
      for (const [k, file] of bundles) imports.get(k)?.push(await probe(file));
    }
    const bareMs = summarize(bare.map((s) => s.ms));
    const perHandler = Object.fromEntries(
      HANDLERS.map((name) => {
        const row = Object.fromEntries(
          Object.keys(variants).map((variant) => {
            const file = bundles.get(key(name, variant)) ?? '';
            const samples = imports.get(key(name, variant)) ?? [];
            const ms = summarize(samples.map((s) => s.ms));
            return [
              variant,
              {
                bundleBytes: statSync(file).size,
                sourceMapBytes: statSync(`${file}.map`).size,
                startMs: ms,
                startP50RatioToBareNode: ratio(ms.p50Ms, bareMs.p50Ms),
                peakRssMib: round(Math.max(...samples.map((s) => s.maxRssKib)) / 1024, 1),
              },
            ];
          }),
        );
        return [name, row];
      }),
    );
    const shipped = HANDLERS.map(
      (n) => perHandler[n]!['shipped'] as { bundleBytes: number; startP50RatioToBareNode: number },
    );
    return {
      bench: 'lambdas',
      rounds: options.rounds,
      bareNodeStartMs: bareMs,
      bareNodePeakRssMib: round(Math.max(...bare.map((s) => s.maxRssKib)) / 1024, 1),
      handlers: perHandler,
      targets: {
        atMost1MbPerBundle: shipped.every((s) => s.bundleBytes <= 1_000_000),
        importAtMost2xBareNode: shipped.every((s) => s.startP50RatioToBareNode <= 2),
      },
      machine: machineInfo(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
