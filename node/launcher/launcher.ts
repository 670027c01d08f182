import { readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';

/**
 * The executable the runtime calls (dist/vpc-lease-cni). Every CNI call is a new process, and compiling the
 * bundle is most of what it costs above bare `node`: this launcher runs the bundle
 * (vpc-lease-cni.js, beside it) through V8's code cache. The cache is written next to the bundle the first time
 * a kind of call runs without one (or V8 rejects it after a Node upgrade): one for the link-touching commands,
 * which compile netlink and the claim path, and one for the rest. A cache that cannot be written costs only speed.
 */
export function launch(): void {
  const self = realpathSync(process.argv[1] ?? '');
  const dir = dirname(self);
  const bundle = join(dir, 'vpc-lease-cni.js');
  const command = process.env['CNI_COMMAND'];
  const flavor = command === 'ADD' || command === 'DEL' || command === 'CHECK' ? 'link' : 'base';
  const cacheFile = join(dir, `vpc-lease-cni.${flavor}.v8cache`);
  const source = readFileSync(bundle, 'utf8');
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    cachedData = undefined;
  }
  const wrapped = `(function (exports, require, module, __filename, __dirname) {${source}\n})`;
  const script = new Script(wrapped, { filename: bundle, ...(cachedData ? { cachedData } : {}) });
  if (!cachedData || script.cachedDataRejected) {
    // At exit, so the cache also holds every function the call compiled lazily.
    process.once('exit', () => {
      try {
        const tmp = `${cacheFile}.${process.pid}.tmp`;
        writeFileSync(tmp, script.createCachedData(), { mode: 0o644 });
        renameSync(tmp, cacheFile);
      } catch {
        // read-only bin dir: run uncached
      }
    });
  }
  const fn = script.runInThisContext() as (
    exports: object,
    require: NodeJS.Require,
    module: { exports: object },
    filename: string,
    dirname: string,
  ) => void;
  const mod = { exports: {} };
  fn(mod.exports, createRequire(bundle), mod, bundle, dir);
}

launch();
