import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { PolicyDocument } from './node-policy.js';
import type { ContextValue, IamRequest } from './request-context.js';

export interface IamDecision {
  readonly allowed: boolean;
  /** `Allowed`, `ImplicitlyDenied` or `ExplicitlyDenied`, as iam-simulate answers. */
  readonly result: string;
}

/**
 * Evaluates one request against identity policies with @cloud-copilot/iam-simulate (a maintained IAM engine:
 * every condition operator, policy variables, set operators), not an evaluator written next to the policy.
 * An empty multi-valued key is left out, as IAM leaves it out, so `Null` and `ForAllValues` see it as absent.
 */
export async function evaluate(
  policies: readonly PolicyDocument[],
  principalArn: string,
  accountId: string,
  request: IamRequest,
): Promise<IamDecision> {
  const contextVariables: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(request.context) as [string, ContextValue][]) {
    if (typeof v === 'string') contextVariables[k] = v;
    else if (v.length > 0) contextVariables[k] = [...v];
  }
  const response = await runSimulation(
    {
      identityPolicies: policies.map((policy, i) => ({ name: `policy-${i}`, policy })),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        action: request.action,
        principal: principalArn,
        resource: { resource: request.resource, accountId },
        contextVariables,
      },
    },
    {},
  );
  if (response.resultType === 'error')
    throw new Error(`failed to evaluate ${request.action} on ${request.resource}: ${JSON.stringify(response.errors)}`);
  return { allowed: response.overallResult === 'Allowed', result: response.overallResult };
}
