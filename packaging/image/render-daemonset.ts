/**
 * `npm run -s daemonset -- <image uri>`: prints node/deploy/daemonset.yaml with its installer image set, e.g. to
 * what `npm run -s push-image` printed (`registry/vpc-lease-cni@sha256:…`) or the stack's `NodeImageUri` output:
 *
 *   npm run -s daemonset -- "$(aws cloudformation describe-stacks --stack-name VpcLease \
 *     --query "Stacks[0].Outputs[?OutputKey=='NodeImageUri'].OutputValue" --output text)" | kubectl apply -f -
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { parseImageReference } from './reference.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DAEMONSET_FILE = join(root, 'node', 'deploy', 'daemonset.yaml');

/**
 * What the manifest holds where the installer image goes. A YAML mapping, not a string, so an unrendered manifest
 * fails at `kubectl apply` (a container's image must be a string) instead of leaving every node without a plugin.
 */
export const IMAGE_PLACEHOLDER = '{ unrendered: "npm run -s daemonset -- <image uri>" }';

/** The installer (init container) and the agent run the same image. */
export const IMAGE_PLACEHOLDER_COUNT = 2;

/** The manifest with the placeholder (the installer's and the agent's image, exactly twice) replaced by `image`. */
export function renderDaemonSet(manifest: string, image: string): string {
  parseImageReference(image);
  const line = /^(\s*image: )(.*)$/gm;
  const placeholders = [...manifest.matchAll(line)].filter((m) => m[2] === IMAGE_PLACEHOLDER);
  if (placeholders.length !== IMAGE_PLACEHOLDER_COUNT)
    throw new ValidationError(
      `expected the image placeholder ${IMAGE_PLACEHOLDER_COUNT} times in the manifest, found ${placeholders.length}`,
    );
  return manifest.replace(line, (whole, head: string, value: string) =>
    value === IMAGE_PLACEHOLDER ? `${head}${image}` : whole,
  );
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const image = process.argv[2];
  if (!image || process.argv.length > 3) {
    process.stderr.write('usage: npm run -s daemonset -- <registry/repository:tag or @sha256:digest>\n');
    process.exit(2);
  }
  try {
    process.stdout.write(renderDaemonSet(readFileSync(DAEMONSET_FILE, 'utf8'), image));
  } catch (err) {
    process.stderr.write(`daemonset: ${errorMessage(err)}\n`);
    process.exit(2);
  }
}
