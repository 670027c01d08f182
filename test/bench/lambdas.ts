/**
 * `npm run bench -- lambdas`: what a cold start pays for each Lambda bundle. Each handler is bundled twice into
 * a scratch directory, the way the project ships it (packaging/lambda-bundle.ts), the same without the SDK schema-key
 * rewrite (`schemaKeysKept`, the 2026-12-01 bundle) and the earlier unminified way (`before`), and each bundle is imported by a fresh Node (this Node, the Lambdas' major) with
 * `--enable-source-maps` as the functions run, paired round by round with a bare `node -e ''`.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { type BuildOptions, build } from 'esbuild';
import { lambdaBuildOptions } from '../../packaging/lambda-bundle.js';
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

/** The shipped options less the SDK schema-key rewrite (packaging/sdk-schema-keys.ts). */
function schemaKeysKeptOptions(entry: string, outfile: string): BuildOptions {
  return { ...lambdaBuildOptions(entry, outfile), plugins: [] };
}

// performance.now() counts from the child's own start, so the figure includes Node's boot as a cold start does.
// CPU time is reported beside it: on a loaded machine the wall time is mostly waiting for a core.
const PROBE =
  'if (process.argv[1]) await import(process.argv[1]); const u = process.resourceUsage(); ' +
  'process.stdout.write(JSON.stringify({ ms: performance.now(), cpuMs: (u.userCPUTime + u.systemCPUTime) / 1000, maxRssKib: u.maxRSS }));';

interface Sample {
  readonly ms: number;
  readonly cpuMs: number;
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
    const variants = {
      shipped: lambdaBuildOptions,
      schemaKeysKept: schemaKeysKeptOptions,
      before: unshakenOptions,
    } as const;
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
    const bareCpuMs = summarize(bare.map((s) => s.cpuMs));
    const perHandler = Object.fromEntries(
      HANDLERS.map((name) => {
        const row = Object.fromEntries(
          Object.keys(variants).map((variant) => {
            const file = bundles.get(key(name, variant)) ?? '';
            const samples = imports.get(key(name, variant)) ?? [];
            const ms = summarize(samples.map((s) => s.ms));
            const cpuMs = summarize(samples.map((s) => s.cpuMs));
            return [
              variant,
              {
                bundleBytes: statSync(file).size,
                sourceMapBytes: statSync(`${file}.map`).size,
                startMs: ms,
                startP50RatioToBareNode: ratio(ms.p50Ms, bareMs.p50Ms),
                startCpuMs: cpuMs,
                startCpuP50RatioToBareNode: ratio(cpuMs.p50Ms, bareCpuMs.p50Ms),
                peakRssMib: round(Math.max(...samples.map((s) => s.maxRssKib)) / 1024, 1),
              },
            ];
          }),
        );
        return [name, row];
      }),
    );
    const shipped = HANDLERS.map(
      (n) =>
        perHandler[n]!['shipped'] as {
          bundleBytes: number;
          startP50RatioToBareNode: number;
          startCpuP50RatioToBareNode: number;
        },
    );
    return {
      bench: 'lambdas',
      rounds: options.rounds,
      bareNodeStartMs: bareMs,
      bareNodeStartCpuMs: bareCpuMs,
      bareNodePeakRssMib: round(Math.max(...bare.map((s) => s.maxRssKib)) / 1024, 1),
      handlers: perHandler,
      targets: {
        atMost1MbPerBundle: shipped.every((s) => s.bundleBytes <= 1_000_000),
        importAtMost2xBareNode: shipped.every((s) => s.startP50RatioToBareNode <= 2),
        importCpuAtMost2xBareNode: shipped.every((s) => s.startCpuP50RatioToBareNode <= 2),
      },
      machine: machineInfo(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
