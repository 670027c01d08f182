/**
 * `npm run daemonset -- <image>`: prints node/deploy/daemonset.yaml with its installer image replaced, e.g. by
 * the ECR URI the CDK construct publishes (its `NodeImageUri` output) or `registry/vpc-lease-cni@sha256:…`:
 *
 *   npm run -s daemonset -- "$(aws cloudformation describe-stacks --stack-name VpcLease \
 *     --query "Stacks[0].Outputs[?OutputKey=='NodeImageUri'].OutputValue" --output text)" | kubectl apply -f -
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ValidationError } from '../../shared/errors.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DAEMONSET_FILE = join(root, 'node', 'deploy', 'daemonset.yaml');

/** An image reference: registry/path with a :tag and/or @sha256 digest, or a CloudFormation-resolved URI. */
const IMAGE_REF = /^[a-z0-9][a-z0-9._\-/:]*(@sha256:[0-9a-f]{64})?$/;

/** The manifest with the `install` init container's image set to `image`; exactly one such line must exist. */
export function renderDaemonSet(manifest: string, image: string): string {
  if (!IMAGE_REF.test(image)) throw new ValidationError(`not an image reference: ${JSON.stringify(image)}`);
  const installImage = /^(\s*- name: install\n\s*image: )\S+$/gm;
  const found = manifest.match(installImage)?.length ?? 0;
  if (found !== 1) throw new ValidationError(`expected one install container with an image, found ${found}`);
  return manifest.replace(installImage, (_, head: string) => `${head}${image}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const image = process.argv[2];
  if (!image) {
    process.stderr.write('usage: npm run -s daemonset -- <image uri>\n');
    process.exit(2);
  }
  process.stdout.write(renderDaemonSet(readFileSync(DAEMONSET_FILE, 'utf8'), image));
}
