import { createRequire } from 'node:module';

/** aws-cdk-lib bundles `yaml` (1.x); the project has no YAML parser of its own and needs none outside tests. */
const YAML = createRequire(createRequire(import.meta.url).resolve('aws-cdk-lib'))('yaml') as {
  parseAllDocuments(text: string): { errors: unknown[]; toJSON(): unknown }[];
};

export interface K8sObject {
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string };
  readonly [key: string]: unknown;
}

/** Every document of a multi-document manifest; a syntax error in any of them throws. */
export function parseManifest(text: string): K8sObject[] {
  return YAML.parseAllDocuments(text).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`YAML: ${String(doc.errors[0])}`);
    return doc.toJSON() as K8sObject;
  });
}
