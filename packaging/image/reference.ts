import { ValidationError } from '../../shared/errors.js';

/**
 * Image references as the distribution spec writes them: `host[:port]/path[:tag][@sha256:digest]`. Lower-case
 * path components joined by `.`, `_`, `__` or `-`; a tag of at most 128 characters. Nothing here can start with
 * `-`, so a reference never reads as an option of the tools it is handed to.
 */
const HOST = '[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::\\d{1,5})?';
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const TAG = '[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}';
const DIGEST = 'sha256:[0-9a-f]{64}';
const REFERENCE = new RegExp(`^(${HOST})/(${COMPONENT}(?:/${COMPONENT})*)(?::(${TAG}))?(?:@(${DIGEST}))?$`);

export interface ImageReference {
  /** `host[:port]`, e.g. `123456789012.dkr.ecr.eu-west-1.amazonaws.com` or `127.0.0.1:5000`. */
  readonly registry: string;
  readonly repository: string;
  readonly tag?: string;
  readonly digest?: string;
}

/** @throws ValidationError unless `text` is a full reference with a registry and a tag or a digest. */
export function parseImageReference(text: string): ImageReference {
  const m = REFERENCE.exec(text);
  if (!m || (m[3] === undefined && m[4] === undefined))
    throw new ValidationError(
      `not an image reference with a registry and a tag or digest (registry/repository:tag): ${JSON.stringify(text)}`,
    );
  return {
    registry: m[1]!,
    repository: m[2]!,
    ...(m[3] !== undefined ? { tag: m[3] } : {}),
    ...(m[4] !== undefined ? { digest: m[4] } : {}),
  };
}

/** `registry/repository@digest`: what a node pulls, immutable whatever happens to the tag later. */
export function digestReference(ref: ImageReference, digest: string): string {
  return `${ref.registry}/${ref.repository}@${digest}`;
}

/** ECR's registry host, in every partition (`.amazonaws.com.cn` in China) and with its FIPS endpoints. */
const ECR_REGISTRY = /^\d{12}\.dkr\.ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?$/;

/** The Region of an ECR registry host, or undefined for any other registry. */
export function ecrRegion(registry: string): string | undefined {
  return ECR_REGISTRY.exec(registry)?.[1];
}
